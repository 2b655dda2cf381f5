"""A streaming query reading a samsa cluster survives the death of a partition leader.

Three samsa nodes over one PostgreSQL hold a 6-partition topic. An ``availableNow`` query
(local[2]: two task slots, one task per partition) reads it into Parquet through a pandas UDF
that holds the micro-batch's first two tasks (partitions 0 and 1) while a ``hold`` file
exists. Those two partitions hold 20 MB each, more than Spark buffers between the reader
and the held UDF (about 8 MB here), and the reader fetches 16 KiB at a time: the reader of
partition 0 stops in the middle of its range. The test SIGKILLs partition 0's leader and
releases the hold: that reader's next fetch fails, and it must find the new leader (the
lease moves to a live node) and carry on in the same task (local mode does not retry
tasks); the tasks of the other partitions start after the kill. More records are produced
after the kill and read by a second ``availableNow`` run from the checkpoint. The Parquet
output holds every record of the log exactly once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from samsa import Admin, Producer
from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, wait_until
from tests.pg import PostgresServer, unavailable_reason

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

TOPIC = "clicks"
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


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.stop()


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


def start_query(spark: Any, bootstrap: str, work: Path) -> Any:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    markers, hold = str(work / "markers"), str(work / "hold")

    @F.pandas_udf("binary")  # type: ignore[call-overload]
    def gate(values: pd.Series, partitions: pd.Series) -> pd.Series:
        """Leave ``<partition>-<attempt>``; wait while the hold file exists."""
        ctx = TaskContext.get()
        assert ctx is not None
        Path(markers, f"{int(partitions.iloc[0])}-{ctx.attemptNumber()}").touch()
        deadline = time.monotonic() + 120
        while os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        return values

    df = (spark.readStream.format("samsa").option("bootstrap.servers", bootstrap)
          .option("subscribe", TOPIC).option("startingOffsets", "earliest")
          .option("fetch.max.bytes", "16384").load())
    return (df.select("topic", "partition", "offset", gate("value", "partition").alias("value"))
            .writeStream.format("parquet").option("path", str(work / "out"))
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True).start())


def finish(q: Any) -> None:
    assert q.awaitTermination(150), "the availableNow query did not finish"
    assert q.exception() is None, q.exception()


def test_leader_killed_mid_batch_exactly_once(spark: Any, samsa_cluster: SamsaCluster,
                                              tmp_path: Path) -> None:
    cluster = samsa_cluster
    expected = produce(cluster.bootstrap, "a", BEFORE)
    expected.update(produce(cluster.bootstrap, "big", BIG, range(2)))
    markers = tmp_path / "markers"
    markers.mkdir()
    hold = tmp_path / "hold"
    hold.touch()
    # The UDF sees the rows 100 at a time, so it holds a task early in its range.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        q = start_query(spark, cluster.bootstrap, tmp_path)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    try:
        wait_until(lambda: len(list(markers.iterdir())) >= 2 or not q.isActive, 120,
                   "two tasks in the UDF")
        assert q.isActive, q.exception()
        running = {int(m.name.split("-")[0]) for m in markers.iterdir()}
        assert running == {0, 1}, "Spark started other tasks first"
        leaders = cluster.leaders()
        victim = leaders[0]
        assert victim is not None
        assert not (tmp_path / "checkpoint" / "commits" / "0").exists()
        cluster.nodes[victim].kill()
        hold.unlink()

        # Records produced after the kill go to the new leaders; the second run reads them.
        expected.update(produce(cluster.live_bootstrap, "b", AFTER))
        finish(q)
        assert {int(m.name.split("-")[0]) for m in markers.iterdir()} == set(range(PARTITIONS))
        moved = {p for p, owner in leaders.items() if owner == victim}
        now = cluster.leaders()
        assert all(now[p] not in (None, victim) for p in moved)
        q = start_query(spark, cluster.bootstrap, tmp_path)  # the dead node still listed
        finish(q)
    finally:
        hold.unlink(missing_ok=True)
        if q.isActive:
            q.stop()

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = [((r.partition, r.offset), r.value) for r in rows]
    assert len(got) == len(dict(got)), "records written twice"
    assert dict(got) == expected
    assert {r.topic for r in rows} == {TOPIC}
    with Admin(cluster.live_bootstrap) as admin:
        ends = admin.list_offsets({(TOPIC, p): "latest" for p in range(PARTITIONS)})
    assert sum(off for off, _ in ends.values()) == len(expected)
