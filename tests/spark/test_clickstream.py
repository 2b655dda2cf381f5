"""The clickstream example: restart from checkpoints loses and duplicates nothing, on
local[2] and on a Spark standalone cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from examples.clickstream import generator, run

from tests.brokerproc import BrokerProcess
from tests.spark.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_expected_counts_only_closed_windows() -> None:
    events = generator.clicks(1200, 0, step_ms=100)  # 2 minutes of event time
    assert run.expected_counts(events) == {}
    events = generator.clicks(3000, 0, step_ms=100)  # 5 minutes: minutes 0 and 1 closed
    counts = run.expected_counts(events)
    assert {w[0].minute for w in counts} == {0, 1}
    assert sum(counts.values()) == 1200


def test_clickstream_demo(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    run.demo(spark, broker.bootstrap, tmp_path, events=3000, topic="clicks-demo",
             results="page-counts-demo")


def test_clickstream_on_standalone_cluster(spark_cluster: StandaloneCluster,
                                          tmp_path: Path) -> None:
    """The one-command example with ``--master spark://...``: its own broker, its own
    driver process, executors on the cluster's two workers."""
    before = {a["id"] for a in spark_cluster.state()["completedapps"]}
    proc = subprocess.run(
        [sys.executable, "-m", "examples.clickstream", "--master", spark_cluster.master_url,
         "--events", "3000", "--keep", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "parquet: " in proc.stdout and "topic page-counts: " in proc.stdout
    assert proc.stdout.count("nothing lost or duplicated") == 2
    apps = [a for a in spark_cluster.state()["completedapps"] if a["id"] not in before]
    assert [a["name"] for a in apps] == ["clickstream"]
    assert apps[0]["cores"] == 2  # an executor on each worker
