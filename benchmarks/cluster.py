"""Three samsa nodes over one PostgreSQL beside a single local node, in the same run.

* produce MB/s of 1 KiB records with confluent-kafka, acks=1 and acks=all (idempotent),
  with the CPU each process burnt per MB produced (ms of one core): the client, each
  broker node, and PostgreSQL (every server process: backends, WAL writer, checkpointer).
  The acks=all run starts once the acks=1 records are committed (acks=1 answers before
  the commit), on leases that stopped moving;
* fetch MB/s of the same records with a confluent-kafka consumer (assign, no group);
* the PostgreSQL write path alone (``--append-only``): one node's engine in this process
  appending 256 KiB batches to 2 partitions, 5 appends in flight per partition, each
  awaited until committed (what acks=all waits for), with the CPU per MB of this process
  and of PostgreSQL: no client, no broker, no other node;
* failover: seconds from the SIGKILL of the node coordinating a group until the group is
  Stable again with every partition assigned and records flow from every partition, for
  confluent-kafka, Apache Kafka's Java client 4.3 and ``samsa.Consumer``, each with the
  classic and the KIP-848 consumer protocol, in a settled group and mid-rebalance (the
  scenario of tests/cluster/test_cluster_failover.py, tests/cluster/failover.py).

PostgreSQL runs as in the tests (tests/pg.py: a throwaway server, fsync on for this run, so
acks=all waits for a durable commit). Run as root (PostgreSQL is started as the postgres
user through runuser): ``.venv/bin/python benchmarks/cluster.py [--records N] [--repeat N]
[--failover-runs N] [--failover-only | --throughput-only | --append-only]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.brokerproc import BrokerProcess
from tests.cluster import failover
from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, query, wait_until
from tests.cluster.test_cluster_clients import leaders, three_nodes
from tests.conformance.javakit import JavaKit, compiled
from tests.pg import PostgresServer
from tests.records import make_batch

from samsa.log import LogConfig
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import PgPartitionLog

RECORD = b"x" * 1024
PARTITIONS = 6
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds(pg: PostgresServer) -> float:
    """CPU of the whole PostgreSQL server: the postmaster with the children it reaped, and
    its live children (backends, WAL writer, checkpointer, autovacuum)."""
    assert pg.root is not None
    master = int((pg.root / "data" / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == master:
            total += sum(int(f) for f in fields[11:15]) / tick  # + reaped children's
        elif int(fields[1]) == master:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class CpuMeter:
    """CPU seconds per process between :meth:`start` and :meth:`stop`, as ms per MB."""

    def __init__(self, pids: dict[str, int], pg: PostgresServer | None) -> None:
        self.pids, self.pg = pids, pg
        self._start: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        if self.pg is not None:
            now["postgres"] = postgres_cpu_seconds(self.pg)
        now["client"] = time.process_time()
        return now

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> None:
        end = self._now()
        self.used = {k: end[k] - self._start[k] for k in end}

    def per_mb(self, mb: float) -> str:
        total = sum(self.used.values())
        parts = ", ".join(f"{k} {v * 1000 / mb:.1f}" for k, v in self.used.items())
        return f"CPU ms/MB: {parts}; total {total * 1000 / mb:.1f}"


def produce_mb_s(bootstrap: str, topic: str, n: int, acks: str,
                 meter: CpuMeter | None = None) -> tuple[float, str]:
    """MB/s, and a detail line: when the first record was acknowledged (an idempotent
    producer first gets its id) and the CPU the client itself burnt (with ``meter``: every
    process's CPU per MB)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "enable.idempotence": acks == "all", "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    first: list[float] = []
    if meter is not None:
        meter.start()
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
    mb = n * len(RECORD) / 1e6
    detail = (f"acks={acks}: {elapsed:.2f} s, first ack seen after {first[0] - started:.2f} s, "
              f"client CPU {time.process_time() - cpu:.2f} s")
    if meter is not None:
        meter.stop()
        detail += f"; {meter.per_mb(mb)}"
    return mb / elapsed, detail


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


def settle(dsn: str, bootstraps: list[str], timeout: float = 60) -> None:
    """Wait until every partition's lease is held and has not moved for a second (the
    placement spreads new partitions over the nodes by hand-offs) and every node's Metadata
    names the owners: a producer started earlier would measure its retries."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        now = leases(dsn)
        topics = {k: v for k, v in now.items() if not k[0].startswith("__")}
        if now == last and all_owned(dsn, {1, 2, 3}) and all(
                {k: v for k, v in leaders(b).items() if k in topics} == topics
                for b in bootstraps):
            return
        last = now
        time.sleep(1)
    raise AssertionError("the leases did not settle")


def committed(dsn: str, topic: str) -> int:
    """Records of ``topic`` committed in the database (each record is one offset)."""
    rows = query(dsn, "SELECT coalesce(sum(log_end - log_start), 0) AS n FROM samsa_partitions "
                      "WHERE topic = $1", topic)
    return int(rows[0]["n"])


class _TempDirs:
    """``mktemp`` as pytest's TempPathFactory gives it (the Java kit compiles into one)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        return path


def _figure(outs: list[failover.Outcome]) -> str:
    """Median seconds to both (range over the runs), then the medians of each: the group
    Stable with every partition assigned, every partition delivering records again."""
    total = [o.seconds for o in outs]
    stable = statistics.median(o.stable_after for o in outs)
    resumed = statistics.median(o.resumed_after for o in outs)
    spread = f" ({min(total):.1f}-{max(total):.1f})" if len(outs) > 1 else ""
    return f"{statistics.median(total):.1f}{spread} = {stable:.1f} / {resumed:.1f}"


def failover_rows(root: Path, pg: PostgresServer, runs: int) -> list[str]:
    """Seconds from the SIGKILL of the node coordinating a group until the group is Stable
    again with every partition assigned and every partition delivers records produced after
    the kill, per client and group protocol, in a settled group and right after a third
    member joined (mid-rebalance): the runs of tests/cluster/test_cluster_failover.py."""
    dsn = pg.create_database("failover")
    (root / "failover").mkdir(parents=True, exist_ok=True)
    kits: list[JavaKit] = []

    def java() -> JavaKit:
        if not kits:
            kits.append(compiled(_TempDirs(root)))  # type: ignore[arg-type]
        return kits[0]

    rows = []
    try:
        with three_nodes(root / "failover", dsn, failover.CLUSTER_CONFIG) as cluster:
            for kind in [(c, p) for c in failover.CLIENTS for p in failover.PROTOCOLS]:
                figures = []
                for moment in failover.MOMENTS:
                    outs = []
                    for i in range(runs):
                        try:
                            outs.append(failover.run(cluster, kind, moment,
                                                     f"bench-{'-'.join(kind)}-{moment}-{i}",
                                                     java))
                        except pytest.skip.Exception as exc:  # no Java here
                            outs = []
                            print(f"{kind}: skipped ({exc})")
                            break
                    figures.append("-" if not outs else _figure(outs))
                rows.append(f"{kind[0]:<11} {kind[1]:<9} {figures[0]:>30} {figures[1]:>30}")
    finally:
        for kit in kits:
            kit.stop_all()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1,
                    help="produce and fetch runs (fresh topics each); every run is printed")
    ap.add_argument("--failover-runs", type=int, default=3,
                    help="runs per client, protocol and moment (the median is printed)")
    ap.add_argument("--failover-only", action="store_true", help="skip produce and fetch")
    ap.add_argument("--throughput-only", action="store_true", help="skip the failover rows")
    ap.add_argument("--append-only", action="store_true",
                    help="only the PostgreSQL write path, without clients or nodes")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="samsa-bench-cluster-"))
    pg = PostgresServer(fsync=True).start()
    try:
        if args.append_only:
            for _ in range(args.repeat):
                print(asyncio.run(append_path(pg, args.records * len(RECORD))))
            return
        if not args.failover_only:
            throughput(root, pg, args.records, args.repeat)
        if args.throughput_only:
            return
        print("failover, s: SIGKILL of the node coordinating the group -> the group Stable "
              "again with every partition assigned / records flowing from every partition "
              "(produced after the kill: includes the partition leaders' fail-over)")
        print(f"{'client':<11} {'protocol':<9} {'settled group':>30} {'mid-rebalance':>30}")
        for row in failover_rows(root, pg, args.failover_runs):
            print(row)
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


async def append_path(pg: PostgresServer, total: int, partitions: int = 2,
                      in_flight: int = 5) -> str:
    """The write path of one node alone: MB/s of appends committed, and CPU per MB."""
    dsn = pg.create_database("append")
    engine = PgEngine(dsn, 1)
    engine.open()
    batch = make_batch([(None, RECORD)] * 256)
    plogs = []
    for i in range(partitions):
        async def make(pool: Any, i: int = i) -> int:
            await pool.execute("INSERT INTO samsa_topics (name, id) VALUES ($1, "
                               "gen_random_uuid())", f"t{i}")
            return int(await pool.fetchval(
                "INSERT INTO samsa_partitions (topic, idx, owner, epoch) VALUES ($1, 0, 1, 1) "
                "RETURNING pid", f"t{i}"))

        plog = PgPartitionLog(engine, await engine.db.run(make), f"t{i}", 0, LogConfig())
        await plog.become_leader(1, 0, 0)
        plogs.append(plog)
    slots = asyncio.Semaphore(partitions * in_flight)

    async def append(plog: PgPartitionLog) -> None:
        try:
            info = plog.append(batch, int(time.time() * 1000))
            await plog.wait_durable(info.last_offset + 1)
        finally:
            slots.release()

    meter = CpuMeter({}, pg)
    meter.start()
    started = time.perf_counter()
    tasks = []
    for i in range(max(1, total // len(batch))):
        await slots.acquire()
        tasks.append(asyncio.create_task(append(plogs[i % partitions])))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    meter.stop()
    mb = len(tasks) * len(batch) / 1e6
    rounds = engine.writer.rounds
    for plog in plogs:
        plog.close()
    engine.close()
    return (f"append path: {mb / elapsed:.1f} MB/s committed, {rounds} rounds "
            f"({mb / rounds:.1f} MB each); {meter.per_mb(mb).replace('client', 'engine')}")


def throughput(root: Path, pg: PostgresServer, records: int, repeat: int = 1) -> None:
    """Produce and fetch MB/s, a single local node beside three nodes over PostgreSQL; the
    CPU per MB of every process (the single node's row has no PostgreSQL)."""
    single = BrokerProcess(root / "single", GROUP_CONFIG).start()
    dsn = pg.create_database("bench")
    nodes = [ClusterNodeProcess(root, i, dsn, GROUP_CONFIG).start() for i in (1, 2, 3)]
    cluster = ",".join(n.bootstrap for n in nodes)
    assert single.proc is not None
    meters = {"single local node": CpuMeter({"broker": single.proc.pid}, None),
              "3 nodes + PostgreSQL": CpuMeter(
                  {f"node{i}": n.proc.pid for i, n in enumerate(nodes, 1) if n.proc is not None},
                  pg)}
    rows = []
    details = []
    try:
        for run in range(repeat):
            for boot in (single.bootstrap, cluster):
                create(boot, f"b1-{run}")
                create(boot, f"ball-{run}")
            settle(dsn, [n.bootstrap for n in nodes])
            for name, boot in (("single local node", single.bootstrap),
                               ("3 nodes + PostgreSQL", cluster)):
                meter = meters[name]
                a1, d1 = produce_mb_s(boot, f"b1-{run}", records, "1", meter)
                if boot == cluster:  # acks=1 answers before the commit: let it finish first
                    wait_until(lambda t=f"b1-{run}": committed(dsn, t) >= records,  # type: ignore[misc]
                               120, "the acks=1 records committed")
                aall, dall = produce_mb_s(boot, f"ball-{run}", records, "all", meter)
                details.append(f"{name}, run {run + 1}: {d1}\n  {dall}")
                fetch = fetch_mb_s(boot, f"ball-{run}", records)
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


if __name__ == "__main__":
    main()
