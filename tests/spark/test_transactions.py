"""The source's ``kafka.isolation.level`` (or ``isolation.level``) on a topic written by a
transactional producer: read_uncommitted (the default, as Spark's Kafka source) returns
every record; read_committed ends at the last stable offset and never returns a record of
an aborted transaction, in batch and streaming queries, in local mode and on the standalone
cluster (``txn_query.py``, its own driver)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import samsa
from samsa.spark.options import OptionError, SourceOptions
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import batch, create_topic, stream, unique
from tests.spark.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("txn_query.py")
COMMITTED = sorted([f"c1-{i}" for i in range(10)] + [f"c2-{i}" for i in range(6)])
ABORTED = [f"a-{i}" for i in range(8)]
OPEN = [f"open-{i}" for i in range(4)]


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txn-broker") / "data",
                         {"transaction.state.log.num.partitions": "2"}).start()
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def written(txn_broker: BrokerProcess) -> Iterator[str]:
    """A 2-partition topic: a committed transaction, an aborted one, a committed one, and
    one left open (flushed, not committed) while the module's tests run."""
    topic = create_topic(txn_broker.bootstrap, unique("txn"), 2)
    p = samsa.Producer(bootstrap_servers=txn_broker.bootstrap, transactional_id=topic)
    p.init_transactions(15)
    for values, commit in (([f"c1-{i}" for i in range(10)], True), (ABORTED, False),
                           ([f"c2-{i}" for i in range(6)], True), (OPEN, None)):
        p.begin_transaction()
        for i, v in enumerate(values):
            p.send(topic, v.encode(), partition=i % 2)
        p.flush(15)
        if commit:
            p.commit_transaction(15)
        elif commit is not None:
            p.abort_transaction(15)
    yield topic
    p.abort_transaction(15)
    p.close()


def values(df: Any) -> list[str]:
    return sorted(r.value.decode() for r in df.collect())


@pytest.mark.parametrize(("given", "committed"), [
    ({}, False), ({"kafka.isolation.level": "read_committed"}, True),
    ({"isolation.level": "READ_COMMITTED"}, True),
    ({"kafka.isolation.level": "read_uncommitted"}, False)])
def test_isolation_option(given: dict[str, str], committed: bool) -> None:
    opts = SourceOptions.parse({"bootstrap.servers": "h:9", "subscribe": "t", **given},
                               batch=True)
    assert opts.read_committed is committed


def test_isolation_option_refuses_other_levels() -> None:
    with pytest.raises(OptionError, match="read_uncommitted or read_committed, not 'serial'"):
        SourceOptions.parse({"bootstrap.servers": "h:9", "subscribe": "t",
                             "kafka.isolation.level": "serial"}, batch=True)


def test_batch_and_stream_read_committed(spark: Any, txn_broker: BrokerProcess,
                                         written: str, tmp_path: Path) -> None:
    assert values(batch(spark, txn_broker, subscribe=written)) == sorted(
        COMMITTED + ABORTED + OPEN)
    committed = batch(spark, txn_broker, subscribe=written,
                      **{"kafka.isolation.level": "read_committed"})
    assert values(committed) == COMMITTED
    # offsets keep their place in the log: the aborted records and markers leave gaps
    assert max(r.offset for r in committed.collect()) > len(COMMITTED) // 2
    query = (stream(spark, txn_broker, subscribe=written, startingOffsets="earliest",
                    **{"isolation.level": "read_committed"})
             .writeStream.format("memory").queryName("txn_committed")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert values(spark.table("txn_committed")) == COMMITTED


def test_read_committed_on_the_standalone_cluster(spark_cluster: StandaloneCluster,
                                                  txn_broker: BrokerProcess, written: str,
                                                  tmp_path: Path) -> None:
    before = {app["id"] for app in spark_cluster.state()["completedapps"]}
    args = [sys.executable, str(DRIVER), "--master", spark_cluster.master_url,
            "--bootstrap", txn_broker.bootstrap, "--topic", written]
    for key, value in spark_cluster.app_conf().items():
        args += ["--conf", f"{key}={value}"]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
                               "PYSPARK_PYTHON": sys.executable,
                               "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["read_committed"] == COMMITTED
    assert result["read_uncommitted"] == sorted(COMMITTED + ABORTED + OPEN)
    apps = [app for app in spark_cluster.state()["completedapps"] if app["id"] not in before]
    assert [app["name"] for app in apps] == ["samsa-txn-test"]
    assert apps[0]["cores"] == 2  # an executor on each worker
