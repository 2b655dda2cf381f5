"""Share groups (KIP-932) against consumer groups, on one samsa broker.

1. Records/s through a share group of 4 confluent-kafka ``ShareConsumer`` members (implicit
   acknowledgement: each poll accepts the previous one) against a consumer group of 4
   ``Consumer`` members (``group.protocol=consumer``), each member in its own thread, on the
   same 4-partition topic of 100 B records; timed from the first record to the last, with
   the broker's CPU seconds over that time and the client's CPU per record (this
   process's: every member's thread and librdkafka's). The ratio is the figure (aim:
   share >= 0.5x consumer). ``--runs N`` repeats the pair on fresh groups; ``--java`` adds
   the Java client's pair in each run (``KafkaShareConsumer`` against ``KafkaConsumer``,
   4 threads in one JVM: tests/conformance/java/GroupRate.java, the JVM's CPU per
   record); ``--window N`` sets the broker's ``group.share.partition.max.record.locks``
   and ``--partitions N`` the topic's partitions.
2. ShareFetch round trips on a raw connection (max_records 500, the previous batch
   accepted in the same request): p50 and p99 in ms of the fetches that acquired records.
3. The cost of 100,000 in-flight records in one share partition (pure core, in process,
   acquired 500 at a time as ShareFetch does): memory per acquired record (tracemalloc) and
   the time to acquire them, and to expire their locks; and the worst case of a window of
   2,000 split into one run per record.

    .venv/bin/python benchmarks/share.py [--records N] [--runs N] [--fetches N]
        [--max-poll-records N] [--window N] [--partitions N] [--java]
        [--baseline CHECKOUT] [--py-spy OUT.svg]

``--baseline`` measures a broker run from another checkout's ``src`` after this one's (a
before/after in one run); ``--py-spy`` profiles this broker during the share-group runs
(py-spy must be installed in the venv).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from functools import partial
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from tests.broker.test_group_api_versions import call  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402
from tests.conformance.groupkit import create_topic  # noqa: E402
from tests.conformance.sharekit import set_group_configs  # noqa: E402
from tests.wire import WireClient  # noqa: E402

from samsa.protocol.api_keys import ApiKey  # noqa: E402
from samsa.share import LockKey, SharePartition, SharePartitionConfig  # noqa: E402

MEMBERS = 4
PARTITIONS = 4
VALUE = b"v" * 100
EXTRA: dict[str, Any] = {}


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                  "log_level": 0, **EXTRA})
    for part in range(PARTITIONS):
        for _ in range(per_partition):
            while True:
                try:
                    p.produce(topic, VALUE, partition=part)
                    break
                except BufferError:
                    p.poll(0.01)
    assert p.flush(120) == 0


def _cpu(pid: int) -> float:
    """The process's CPU seconds so far (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Rate = tuple[float, float, float]


def _drain(make: Any, total: int, poll: Any, pid: int) -> Rate:
    """Run MEMBERS consumers in threads until ``total`` records came; (records/s, broker
    CPU seconds per second, client CPU µs per record: this process's, from the first
    record to the last)."""
    seen = [0] * MEMBERS
    first: list[float] = []
    last = [0.0]
    cpu: list[float] = []
    client: list[float] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        c = make(i)
        try:
            while sum(seen) < total:
                n = poll(c)
                if n:
                    with lock:
                        if not first:
                            first.append(time.perf_counter())
                            cpu.append(_cpu(pid))
                            client.append(time.process_time())
                        seen[i] += n
                        last[0] = time.perf_counter()
                        if sum(seen) >= total and len(client) == 1:
                            cpu.append(_cpu(pid))
                            client.append(time.process_time())
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    elapsed = last[0] - first[0]
    return total / elapsed, (cpu[-1] - cpu[0]) / elapsed, (client[-1] - client[0]) / total * 1e6


def _share_rate(bootstrap: str, topic: str, total: int, pid: int) -> Rate:
    group = f"bench-share-{uuid.uuid4().hex[:6]}"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})

    def make(i: int) -> ShareConsumer:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "log_level": 0, **EXTRA})
        c.subscribe([topic])
        return c

    return _drain(make, total, lambda c: len([m for m in c.poll(0.5) or [] if not m.error()]),
                  pid)


def _consumer_rate(bootstrap: str, topic: str, total: int, pid: int) -> Rate:
    group = f"bench-cg-{uuid.uuid4().hex[:6]}"

    def make(i: int) -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        return c

    return _drain(make, total,
                  lambda c: len([m for m in c.consume(500, 0.5) if not m.error()]), pid)


def _fetch_latency(bootstrap: str, topic: str, fetches: int) -> tuple[float, float]:
    group = f"bench-rt-{uuid.uuid4().hex[:6]}"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    c = WireClient(bootstrap)
    meta = call(c, ApiKey.METADATA, 12, topics=[{"topic_id": None, "name": topic}],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    topic_id = meta.topics[0].topic_id
    times = []
    acks: list[tuple[int, int, int]] = []
    for epoch in range(fetches):
        topics = [{"topic_id": topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [1]}
                for pp, f, last in acks if pp == p]}
            for p in range(PARTITIONS)]}] if epoch == 0 or acks else []
        start = time.perf_counter()
        resp = call(c, ApiKey.SHARE_FETCH, 2, group_id=group, member_id="bench",
                    share_session_epoch=epoch, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                    max_records=500, batch_size=500, share_acquire_mode=1, topics=topics,
                    forgotten_topics_data=[])
        elapsed = (time.perf_counter() - start) * 1000
        acks = [(p.partition_index, a.first_offset, a.last_offset)
                for t in resp.responses for p in t.partitions for a in p.acquired_records]
        if acks:  # only the fetches that acquired records count
            times.append(elapsed)
    c.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


class _Timer:
    def __init__(self) -> None:
        self.deadlines: dict[LockKey, int] = {}

    def schedule(self, key: LockKey, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: LockKey) -> None:
        self.deadlines.pop(key, None)


def _fill(records: int, timer: _Timer) -> SharePartition:
    part = SharePartition("p", 0, timer, SharePartitionConfig(30_000, 5, records))
    for _ in range(records // 500):  # as ShareFetch does: 500 records per acquisition
        part.acquire("m", records, 500, 0)
    return part


def _in_flight(records: int) -> tuple[float, float, float]:
    """(bytes per acquired record, acquire µs per record, expire µs per record)."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = _fill(records, _Timer())
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    timer = _Timer()
    start = time.perf_counter()
    part = _fill(records, timer)
    acquire = time.perf_counter() - start
    start = time.perf_counter()
    for key in list(timer.deadlines):
        part.fire(key, 30_000)
    expire = time.perf_counter() - start
    return size / records, acquire / records * 1e6, expire / records * 1e6


def _split(records: int) -> tuple[float, float]:
    """The worst case: every record acknowledged unlike its neighbours (RELEASE and RENEW
    in turn), so each is a run of its own. (bytes per record, acknowledge µs per record)."""
    def split(part: SharePartition) -> None:
        for first in range(0, records, 500):
            types = [2 if i % 2 else 4 for i in range(500)]
            part.acknowledge("m", [(first, first + 499, types)], 0)

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = _fill(records, _Timer())
    split(kept)
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    part = _fill(records, _Timer())
    start = time.perf_counter()
    split(part)
    return size / records, (time.perf_counter() - start) / records * 1e6


class _Tmp:
    """What :func:`tests.conformance.javakit._build` needs of pytest's tmp_path_factory."""

    def __init__(self, root: str) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=name, dir=self.root))


def _java_rate(kit: Any, bootstrap: str, topic: str, total: int, pid: int,
               kind: str) -> Rate:
    """The Java client's pair (tests/conformance/java/GroupRate.java, MEMBERS threads in one
    JVM): (records/s, broker CPU per second, the JVM's CPU µs per record)."""
    group = f"bench-j{kind}-{uuid.uuid4().hex[:6]}"
    if kind == "share":
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    before = _cpu(pid)
    start = time.perf_counter()
    done = subprocess.run(["java", "-Xmx512m", "-cp", kit.classpath, "GroupRate", bootstrap,
                           group, topic, kind, str(MEMBERS), str(total)],
                          capture_output=True, text=True, timeout=600, check=True)
    broker_cpu = (_cpu(pid) - before) / (time.perf_counter() - start)  # JVM start included
    event = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][-1]
    rate, cpu = float(event["rate"]), float(event["cpu"])
    return rate, broker_cpu, cpu / rate * 1e6


def _measure(args: argparse.Namespace, label: str, env: dict[str, str]) -> dict[str, Any]:
    """One broker (``env`` may point PYTHONPATH at another checkout): the group rates of
    ``args.runs`` runs (each a consumer group then a share group on the same records, side
    by side; with ``--java`` the Java client's pair too), then the ShareFetch round trips."""
    per_partition = args.records // PARTITIONS
    total = per_partition * PARTITIONS
    out: dict[str, Any] = {}
    configs = {"group.consumer.heartbeat.interval.ms": "5000"}
    if args.window:
        configs["group.share.partition.max.record.locks"] = str(args.window)
    kit = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.java:
            from tests.conformance.javakit import _build
            kit = _build(cast(Any, _Tmp(tmp)))
            assert not isinstance(kit, str), kit
        broker = BrokerProcess(Path(tmp) / "data", configs, env=env).start()
        assert broker.proc is not None
        pid = broker.proc.pid
        try:
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            create_topic(broker.bootstrap, topic, PARTITIONS)
            _produce(broker.bootstrap, topic, per_partition)
            pairs: list[tuple[str, Any, Any]] = [("rdkafka", _consumer_rate, _share_rate)]
            if kit is not None:
                pairs.append(("java", partial(_java_rate, kit, kind="consumer"),
                              partial(_java_rate, kit, kind="share")))
            for _ in range(args.runs):
                for client, consumer_rate, share_rate in pairs:
                    consumer = consumer_rate(broker.bootstrap, topic, total, pid)
                    spy = None
                    if args.py_spy and not env:
                        spy = subprocess.Popen(
                            [str(Path(sys.executable).parent / "py-spy"), "record", "-p",
                             str(pid), "-o", args.py_spy, "-r", "200",
                             *(["-f", "raw"] if not args.py_spy.endswith(".svg") else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    share = share_rate(broker.bootstrap, topic, total, pid)
                    if spy is not None:
                        spy.send_signal(2)
                        spy.wait(60)
                    out.setdefault(client, []).append((consumer, share))
                    print(f"{label} {client}: consumer group {consumer[0]:10,.0f} records/s "
                          f"(broker CPU {consumer[1]:.2f}, client {consumer[2]:.2f} "
                          f"µs/record), share group {share[0]:10,.0f} records/s (broker CPU "
                          f"{share[1]:.2f}, client {share[2]:.2f} µs/record): "
                          f"{share[0] / consumer[0]:.2f}x", flush=True)
            out["p50"], out["p99"] = _fetch_latency(broker.bootstrap, topic, args.fetches)
            print(f"{label}: ShareFetch (500 records, acks piggybacked): p50 "
                  f"{out['p50']:.2f} ms, p99 {out['p99']:.2f} ms", flush=True)
        finally:
            broker.stop()
    return out


def main() -> None:
    global PARTITIONS
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--max-poll-records", type=int, default=0,
                        help="the share consumers' max.poll.records (librdkafka: 500)")
    parser.add_argument("--window", type=int, default=0,
                        help="the broker's group.share.partition.max.record.locks (2000)")
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--java", action="store_true",
                        help="also the Java client's pair (KafkaShareConsumer, KafkaConsumer)")
    parser.add_argument("--baseline", default="",
                        help="another checkout (its src/ is used), measured after this one")
    parser.add_argument("--py-spy", default="", help="profile of the share runs (.svg: a "
                        "flame graph, else py-spy's raw stacks)")
    args = parser.parse_args()
    PARTITIONS = args.partitions
    if args.max_poll_records:
        EXTRA["max.poll.records"] = args.max_poll_records
    print(f"{args.records // PARTITIONS * PARTITIONS:,} records of {len(VALUE)} B, "
          f"{PARTITIONS} partitions, {MEMBERS} members")
    brokers = [("this", {})]
    if args.baseline:
        brokers.append(("baseline", {"PYTHONPATH": str(Path(args.baseline) / "src")}))
    results = {label: _measure(args, label, env) for label, env in brokers}
    print("summary (median of runs; ratio: the median of each run's share/consumer):")
    for label, r in results.items():
        for client in ("rdkafka", "java"):
            if client not in r:
                continue
            runs = r[client]
            c = statistics.median(x[0][0] for x in runs)
            s = statistics.median(x[1][0] for x in runs)
            ratio = statistics.median(x[1][0] / x[0][0] for x in runs)
            print(f"  {label:8} {client:7}: consumer {c:10,.0f}/s "
                  f"({statistics.median(x[0][2] for x in runs):.2f} µs client CPU/record), "
                  f"share {s:9,.0f}/s ({statistics.median(x[1][2] for x in runs):.2f} µs/"
                  f"record, broker CPU {statistics.median(x[1][1] for x in runs):.2f}): "
                  f"{ratio:.2f}x (runs {min(x[1][0] / x[0][0] for x in runs):.2f}-"
                  f"{max(x[1][0] / x[0][0] for x in runs):.2f}x)")
        print(f"  {label:8} ShareFetch p99 {r['p99']:.1f} ms")
    per, acquire, expire = _in_flight(100_000)
    print(f"100,000 in-flight records: {per:.0f} B each, acquire {acquire:.2f} µs/record, "
          f"lock expiry {expire:.2f} µs/record")
    per, ack = _split(2_000)
    print(f"2,000 in-flight records (group.share.partition.max.record.locks) split into one "
          f"run each: {per:.0f} B each, acknowledging {ack:.2f} µs/record")


if __name__ == "__main__":
    main()
