"""failOnDataLoss after retention deleted segments the query still needs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa import Admin, Producer, TopicPartition
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import create_topic, stream

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str,
                                                                         int, int]]:
    """A broker whose topic lost its first segments to retention: (broker, topic, start, end)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("loss") / "data",
                           {"log.retention.check.interval.ms": "100"}).start()
    try:
        topic = create_topic(broker.bootstrap, "trimmed", 1,
                             {"segment.bytes": "1024", "retention.bytes": "1500"})
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            for i in range(60):  # one small batch per record
                p.send(topic, f"r{i:03}".encode(), partition=0).result(10)
        tp = TopicPartition(topic, 0)
        deadline = time.monotonic() + 30
        with Admin(broker.bootstrap) as admin:
            while admin.list_offsets({tp: "earliest"})[tp][0] == 0:
                assert time.monotonic() < deadline, "retention never deleted a segment"
                time.sleep(0.1)
            # Retention may delete more segments on later passes: turn it off, let a pass
            # that is under way finish, and only then read where the log starts.
            admin.alter_configs("topic", topic, set={"retention.bytes": "-1"})
            time.sleep(1.0)
            start = admin.list_offsets({tp: "earliest"})[tp][0]
            end = admin.list_offsets({tp: "latest"})[tp][0]
        assert 0 < start < end == 60
        yield broker, topic, start, end
    finally:
        broker.stop()


def _from_zero(spark: Any, broker: BrokerProcess, topic: str, fail: str) -> Any:
    return stream(spark, broker, subscribe=topic, failOnDataLoss=fail,
                  startingOffsets=json.dumps({topic: {"0": 0}}))


def test_fail_on_data_loss_true(spark: Any, trimmed: tuple[BrokerProcess, str, int, int],
                                tmp_path: Path) -> None:
    broker, topic, start, _ = trimmed
    q = (_from_zero(spark, broker, topic, "true").writeStream.format("parquet")
         .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    message = str(info.value)
    assert "failOnDataLoss" in message
    assert f"log start offset is now {start}" in message


def test_fail_on_data_loss_false_skips(spark: Any, trimmed: tuple[BrokerProcess, str, int, int],
                                       tmp_path: Path) -> None:
    broker, topic, start, end = trimmed
    q = (_from_zero(spark, broker, topic, "false").writeStream.format("parquet")
         .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.offset for r in rows) == list(range(start, end))
    assert sorted(r.value for r in rows) == [f"r{i:03}".encode() for i in range(start, end)]


@pytest.mark.parametrize("fail", ["true", "false"])
def test_deleted_topic(spark: Any, broker: BrokerProcess, fail: str) -> None:
    from tests.spark.conftest import produce, unique

    prefix = unique("gone")
    keep = create_topic(broker.bootstrap, f"{prefix}-keep", 1)
    doomed = create_topic(broker.bootstrap, f"{prefix}-doomed", 1)
    produce(broker.bootstrap, keep, [b"k"] * 3)
    produce(broker.bootstrap, doomed, [b"d"] * 3)
    name = prefix.replace("-", "_")
    q = (stream(spark, broker, subscribePattern=f"{prefix}-.*", startingOffsets="earliest",
                failOnDataLoss=fail).writeStream.format("memory").queryName(name).start())
    try:
        q.processAllAvailable()
        with Admin(broker.bootstrap) as admin:
            admin.delete_topics([doomed])
            deadline = time.monotonic() + 30
            while doomed in admin.list_topics():  # deletion is asynchronous
                assert time.monotonic() < deadline, "topic was not deleted"
                time.sleep(0.1)
        produce(broker.bootstrap, keep, [b"k2"] * 2)
        if fail == "true":
            with pytest.raises(Exception, match="is gone"):
                q.processAllAvailable()
        else:
            q.processAllAvailable()
            rows = spark.sql(f"select topic, value from {name}").collect()
            assert sorted((r.topic, bytes(r.value)) for r in rows) == sorted(
                [(keep, b"k")] * 3 + [(keep, b"k2")] * 2 + [(doomed, b"d")] * 3)
    finally:
        q.stop()
