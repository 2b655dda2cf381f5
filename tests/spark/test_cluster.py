"""A streaming query on a Spark standalone cluster (two workers) survives a node's death.

The query (``cluster_query.py``, its own driver process) reads a samsa topic into Parquet
with ``availableNow`` and ``maxOffsetsPerTrigger``, a UDF slowing each task down. A worker
is SIGKILLed with its executor while both tasks of micro-batch 1 run: Spark retries the lost
task on the other executor. While the query runs, ``samsa groups describe`` shows its lag
(the ``groupId`` option). Then the query is stopped in the middle of micro-batch 2 and
restarted from its checkpoint (more records arrived meanwhile), and the Parquet output holds
every record exactly once. The restart happens in the same driver: a second driver would
add half a minute of JVM and executor start-up to the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.spark.conftest import create_topic, produce, unique
from tests.spark.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.timeout(480)]

DRIVER = Path(__file__).with_name("cluster_query.py")
PER_PARTITION = 4000  # two partitions
PER_TRIGGER = 2000  # 1000 per partition: micro-batches 0..3
SLEEP = 3.0  # seconds per task in the UDF


class Driver:
    """``cluster_query.py`` in a process group of its own (killed as a whole)."""

    def __init__(self, cluster: StandaloneCluster, broker: BrokerProcess, work: Path,
                 topic: str, group: str) -> None:
        self.markers = work / "markers"
        self.markers.mkdir(exist_ok=True)
        self.checkpoint = work / "checkpoint"
        self.out = work / "out"
        args = [sys.executable, str(DRIVER), "--master", cluster.master_url,
                "--bootstrap", broker.bootstrap, "--topic", topic, "--group", group,
                "--out", str(self.out), "--checkpoint", str(self.checkpoint),
                "--markers", str(self.markers), "--max-per-trigger", str(PER_TRIGGER),
                "--sleep", str(SLEEP), "--restart-file", str(work / "restart")]
        for key, value in cluster.app_conf().items():
            args += ["--conf", f"{key}={value}"]
        self.restart_file = work / "restart"
        self.log_path = work / "driver.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in wait/kill
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                 "PYTHONPATH": str(root / "src")})

    def wait_until(self, cond: Callable[[], bool], what: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert self.proc.poll() is None, f"driver exited before {what}: {self.tail()}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.tail()}"
            time.sleep(0.1)

    def batch_started(self, n: int) -> bool:
        return (self.checkpoint / "offsets" / str(n)).exists()

    def batch_committed(self, n: int) -> bool:
        return (self.checkpoint / "commits" / str(n)).exists()

    def marker_names(self) -> set[str]:
        return {p.name for p in self.markers.iterdir()}

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.log.close()

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


def _describe(bootstrap: str, group: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", "groups", "describe", group,
         "--bootstrap-server", bootstrap, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


def test_worker_killed_mid_batch_then_restart_exactly_once(
        spark: Any, spark_cluster: StandaloneCluster, broker: BrokerProcess,
        tmp_path: Path) -> None:
    cluster = spark_cluster
    topic = create_topic(broker.bootstrap, unique("cluster"), 2)
    group = unique("cluster-lag")
    values = [b"r%d" % i for i in range(2 * PER_PARTITION)]
    produce(broker.bootstrap, topic, values)
    driver = Driver(cluster, broker, tmp_path, topic, group)
    try:
        # Micro-batch 1 planned, and both of its tasks (one per executor) inside the UDF.
        driver.wait_until(lambda: driver.batch_started(1), "micro-batch 1")
        before = driver.marker_names()
        driver.wait_until(lambda: len(driver.marker_names() - before) >= 2,
                          "both tasks of micro-batch 1")
        assert cluster.executor_pids(0), "worker 0 runs no executor"
        assert not driver.batch_committed(1)
        cluster.kill_worker(0)

        # The query is running: its progress is a consumer group with lag.
        rows = _describe(broker.bootstrap, group)
        assert sorted(r["partition"] for r in rows) == [0, 1]
        for r in rows:
            assert r["topic"] == topic and r["log_end_offset"] == PER_PARTITION
            assert r["current_offset"] >= PER_TRIGGER // 2
            assert r["lag"] == PER_PARTITION - r["current_offset"] > 0
        more = [b"s%d" % i for i in range(2 * 1000)]
        produce(broker.bootstrap, topic, more)  # read after the restart

        driver.wait_until(lambda: any(not m.endswith("-0") for m in driver.marker_names()),
                          "a retried task")
        driver.wait_until(lambda: driver.batch_started(2), "micro-batch 2")
        before = driver.marker_names()
        driver.wait_until(lambda: len(driver.marker_names() - before) >= 1,
                          "a task of micro-batch 2")
        assert not driver.batch_committed(2)
        driver.restart_file.touch()  # stop the query mid-batch; restart from the checkpoint
        assert driver.proc.wait(240) == 0, driver.tail()
        assert "restarting the query" in driver.tail()
    finally:
        driver.stop()
        cluster.ensure_workers()

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    ids = [(r.partition, r.offset) for r in rows]
    assert len(ids) == len(set(ids)), "records written twice"
    assert sorted(ids) == sorted((p, o) for p in (0, 1) for o in range(PER_PARTITION + 1000))
    assert sorted(r.value for r in rows) == sorted(values + more)
