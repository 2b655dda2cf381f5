"""A streaming query reading a samsa cluster survives the death of a partition leader.

Three samsa nodes over one PostgreSQL hold a 6-partition topic. An ``availableNow`` query
(``node_kill_query.py``; one task per partition, two task slots: local[2], or the standalone
cluster's two 1-core executors with the query's own driver process) reads it into Parquet
through a pandas UDF that holds the micro-batch's first two tasks (partitions 0 and 1) while
a ``hold`` file exists. Those two partitions hold 20 MB each, more than Spark buffers
between the reader and the held UDF (about 8 MB here), and the reader fetches 16 KiB at a
time: the reader of partition 0 stops in the middle of its range. The test SIGKILLs
partition 0's leader and releases the hold: that reader's next fetch fails, and it must
find the new leader (the lease moves to a live node) and carry on within the task (no task
is retried); the tasks of the other partitions start after the kill, with the dead node
still in their bootstrap list. More records are produced after the kill and read by a
second ``availableNow`` run from the checkpoint. The Parquet output holds every record of
the log exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa import Admin, Producer
from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, wait_until
from tests.pg import PostgresServer
from tests.spark.node_kill_query import MAX_RECORDS_PER_BATCH, TOPIC, start_query
from tests.spark.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

DRIVER = Path(__file__).with_name("node_kill_query.py")
ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6
BEFORE = 300  # records per partition before the query starts
BIG = 20_000  # more records in partitions 0 and 1, the two held tasks
AFTER = 100  # records per partition produced after the kill
SIZE = 1000  # bytes per value


class SamsaCluster:
    """Three nodes over one database; ``bootstrap`` names them all (dead ones too)."""

    def __init__(self, root: Path, dsn: str) -> None:
        self.dsn = dsn
        self.nodes = {i: ClusterNodeProcess(root, i, dsn) for i in (1, 2, 3)}

    def start(self) -> None:
        for node in self.nodes.values():
            node.start()

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    @property
    def live_bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values() if n.alive())

    def live(self) -> set[int]:
        return {i for i, n in self.nodes.items() if n.alive()}

    def leaders(self) -> dict[int, int | None]:
        return {p: owner for (_, p), (owner, _) in leases(self.dsn, TOPIC).items()}

    def stop(self) -> None:
        for node in self.nodes.values():
            node.kill()


@pytest.fixture
def samsa_cluster(tmp_path: Path, postgres: PostgresServer) -> Iterator[SamsaCluster]:
    cluster = SamsaCluster(tmp_path / "nodes", postgres.create_database("spark"))
    (tmp_path / "nodes").mkdir()
    try:
        cluster.start()
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics({TOPIC: PARTITIONS})
        wait_until(lambda: len(cluster.leaders()) == PARTITIONS
                   and all_owned(cluster.dsn, cluster.live()), 30, "every partition led")
        yield cluster
    finally:
        cluster.stop()


def produce(bootstrap: str, prefix: str, per_partition: int,
            partitions: range = range(PARTITIONS)) -> dict[tuple[int, int], bytes]:
    """Idempotent, acked sends; returns (partition, offset) -> value of each record."""
    with Producer(bootstrap_servers=bootstrap) as p:
        futures = [(v, p.send(TOPIC, v, partition=part))
                   for i in range(per_partition) for part in partitions
                   for v in [f"{prefix}-{part}-{i}-".encode().ljust(SIZE, b".")]]
        p.flush()
        out = {}
        for v, f in futures:
            md = f.result(60)
            out[(md.partition, md.offset)] = v
    return out


def finish(q: Any) -> None:
    assert q.awaitTermination(150), "the availableNow query did not finish"
    assert q.exception() is None, q.exception()


class LocalRun:
    """Both runs in this process, on the test suite's local[2] session."""

    def __init__(self, spark: Any, bootstrap: str, work: Path) -> None:
        self.spark, self.bootstrap, self.work = spark, bootstrap, work
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", MAX_RECORDS_PER_BATCH)
        try:
            self.q = start_query(spark, bootstrap, work)
        finally:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    def running(self) -> bool:
        return bool(self.q.isActive)

    def finish(self) -> None:
        finish(self.q)
        self.q = start_query(self.spark, self.bootstrap, self.work)  # the dead node listed
        finish(self.q)

    def stop(self) -> None:
        if self.q.isActive:
            self.q.stop()


class ClusterRun:
    """``node_kill_query.py`` as the driver of an application on the standalone cluster."""

    def __init__(self, cluster: StandaloneCluster, bootstrap: str, work: Path) -> None:
        self.work = work
        args = [sys.executable, str(DRIVER), "--master", cluster.master_url,
                "--bootstrap", bootstrap, "--work", str(work)]
        for key, value in cluster.app_conf().items():
            args += ["--conf", f"{key}={value}"]
        self.log_path = work / "driver.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self) -> None:
        (self.work / "again").touch()
        try:
            code = self.proc.wait(180)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.log.close()


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_leader_killed_mid_batch_exactly_once(spark: Any, samsa_cluster: SamsaCluster,
                                              tmp_path: Path, request: pytest.FixtureRequest,
                                              where: str) -> None:
    cluster = samsa_cluster
    expected = produce(cluster.bootstrap, "a", BEFORE)
    expected.update(produce(cluster.bootstrap, "big", BIG, range(2)))
    markers = tmp_path / "markers"
    markers.mkdir()
    hold = tmp_path / "hold"
    hold.touch()
    run: LocalRun | ClusterRun
    if where == "local":
        run = LocalRun(spark, cluster.bootstrap, tmp_path)
    else:
        run = ClusterRun(request.getfixturevalue("spark_cluster"), cluster.bootstrap, tmp_path)
    try:
        wait_until(lambda: len(list(markers.iterdir())) >= 2 or not run.running(), 180,
                   "two tasks in the UDF")
        assert run.running(), "the query ended before the kill"
        running = {int(m.name.split("-")[0]) for m in markers.iterdir()}
        assert running == {0, 1}, "Spark started other tasks first"
        leaders = cluster.leaders()
        victim = leaders[0]
        assert victim is not None
        assert not (tmp_path / "checkpoint" / "commits" / "0").exists()
        cluster.nodes[victim].kill()
        hold.unlink()
        # Produced after the kill, to the new leaders; the second run reads them.
        expected.update(produce(cluster.live_bootstrap, "b", AFTER))
        run.finish()
        moved = {p for p, owner in leaders.items() if owner == victim}
        now = cluster.leaders()
        assert all(now[p] not in (None, victim) for p in moved)
    finally:
        hold.unlink(missing_ok=True)
        run.stop()
    # Every task of the killed batch ran once: the readers recovered, Spark retried nothing.
    assert sorted(m.name for m in markers.iterdir()) == [f"{p}-0" for p in range(PARTITIONS)]

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = [((r.partition, r.offset), r.value) for r in rows]
    assert len(got) == len(dict(got)), "records written twice"
    assert dict(got) == expected
    assert {r.topic for r in rows} == {TOPIC}
    with Admin(cluster.live_bootstrap) as admin:
        ends = admin.list_offsets({(TOPIC, p): "latest" for p in range(PARTITIONS)})
    assert sum(off for off, _ in ends.values()) == len(expected)
