"""Three samsa nodes over one PostgreSQL beside a single local node, in the same run.

* produce MB/s of 1 KiB records with confluent-kafka, acks=1 and acks=all (idempotent);
* fetch MB/s of the same records with a confluent-kafka consumer (assign, no group);
* failover: seconds from the SIGKILL of the node coordinating a group until the group is
  Stable again and records flow to its consumer, with the default lease TTL and a short one.

PostgreSQL runs as in the tests (tests/pg.py: a throwaway server, fsync on for this run, so
acks=all waits for a durable commit). Run as root (PostgreSQL is started as the postgres
user through runuser): ``.venv/bin/python benchmarks/cluster.py [--records N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.brokerproc import BrokerProcess
from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, wait_until
from tests.pg import PostgresServer

from samsa.coordinator.hashing import partition_for

RECORD = b"x" * 1024
PARTITIONS = 6
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def produce_mb_s(bootstrap: str, topic: str, n: int, acks: str) -> tuple[float, str]:
    """MB/s, and a detail line: when the first record was acknowledged (an idempotent
    producer first gets its id) and the CPU the client itself burnt."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "enable.idempotence": acks == "all", "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    first: list[float] = []
    cpu = time.process_time()
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, RECORD, partition=i % PARTITIONS,
                          on_delivery=None if i else lambda _e, _m: first.append(
                              time.perf_counter()))
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    elapsed = time.perf_counter() - started
    detail = (f"acks={acks}: {elapsed:.2f} s, first ack seen after {first[0] - started:.2f} s, "
              f"client CPU {time.process_time() - cpu:.2f} s")
    return n * len(RECORD) / elapsed / 1e6, detail


def fetch_mb_s(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fetch",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 0.5):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - started
    c.close()
    return got * len(RECORD) / elapsed / 1e6


def failover_seconds(root: Path, pg: PostgresServer, ttl_ms: int) -> float:
    dsn = pg.create_database("failover")
    config = {**GROUP_CONFIG, "cluster.lease.ttl.ms": str(ttl_ms),
              "offsets.topic.num.partitions": "6"}
    (root / f"ttl{ttl_ms}").mkdir(parents=True, exist_ok=True)
    nodes = {i: ClusterNodeProcess(root / f"ttl{ttl_ms}", i, dsn, config).start()
             for i in (1, 2, 3)}
    try:
        bootstrap = ",".join(n.bootstrap for n in nodes.values())
        create(bootstrap, "f")
        wait_until(lambda: all_owned(dsn, {1, 2, 3}), 30, "leases")
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                      "auto.offset.reset": "latest", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500, "enable.auto.commit": False})
        c.subscribe(["f"])
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
        stop = threading.Event()

        def feed() -> None:
            i = 0
            while not stop.is_set():
                p.produce("f", b"tick", partition=i % PARTITIONS)
                i += 1
                p.poll(0.005)
            p.flush(30)

        feeder = threading.Thread(target=feed)
        feeder.start()
        try:
            deadline = time.monotonic() + 60
            while c.poll(0.2) is None and time.monotonic() < deadline:
                pass
            owner, _ = leases(dsn)[("__consumer_offsets", partition_for("g", 6))]
            assert owner is not None
            killed = time.monotonic()
            nodes[owner].kill()
            # Recovered once a commit succeeds through the new coordinator (the group is
            # Stable there) and every partition delivered records again.
            seen: set[int] = set()
            committed = False
            last_try = 0.0
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                m = c.poll(0.05)
                if m is not None and not m.error() and time.monotonic() - killed > 0.5:
                    seen.add(m.partition())
                if not committed and time.monotonic() - last_try > 0.1:
                    last_try = time.monotonic()
                    with contextlib.suppress(Exception):  # coordinator moving
                        c.commit(asynchronous=False)
                        committed = True
                if committed and len(seen) == PARTITIONS:
                    return time.monotonic() - killed
            raise TimeoutError("records did not flow again")
        finally:
            stop.set()
            feeder.join(30)
            c.close()
    finally:
        for n in nodes.values():
            n.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="samsa-bench-cluster-"))
    pg = PostgresServer(fsync=True).start()
    try:
        single = BrokerProcess(root / "single", GROUP_CONFIG).start()
        dsn = pg.create_database("bench")
        nodes = [ClusterNodeProcess(root, i, dsn, GROUP_CONFIG).start() for i in (1, 2, 3)]
        cluster = ",".join(n.bootstrap for n in nodes)
        try:
            create(single.bootstrap, "b1")
            create(single.bootstrap, "ball")
            create(cluster, "b1")
            create(cluster, "ball")
            wait_until(lambda: all_owned(dsn, {1, 2, 3}), 30, "leases")
            rows = []
            details = []
            for name, boot in (("single local node", single.bootstrap),
                               ("3 nodes + PostgreSQL", cluster)):
                a1, d1 = produce_mb_s(boot, "b1", args.records, "1")
                aall, dall = produce_mb_s(boot, "ball", args.records, "all")
                details.append(f"{name}: {d1}; {dall}")
                fetch = fetch_mb_s(boot, "ball", args.records)
                rows.append((name, a1, aall, fetch))
        finally:
            single.stop()
            for n in nodes:
                n.stop()
        print(f"{'':<22} {'produce acks=1':>15} {'produce acks=all':>17} {'fetch':>10}  (MB/s)")
        for name, a1, aall, fetch in rows:
            print(f"{name:<22} {a1:>15.1f} {aall:>17.1f} {fetch:>10.1f}")
        for line in details:
            print(line)
        for ttl in (10_000, 2_000):
            secs = failover_seconds(root, pg, ttl)
            print(f"failover (SIGKILL of the coordinator node -> records flow to the group), "
                  f"lease ttl {ttl} ms: {secs:.1f} s")
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
