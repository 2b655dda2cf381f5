"""Writers: batch and streaming round trips of keys, values, headers and partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.spark.conftest import batch, create_topic, produce, stream, unique

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

SCHEMA = ("key binary, value binary, partition int, "
          "headers array<struct<key: string, value: binary>>")


def _read_back(spark: Any, broker: BrokerProcess, topic: str) -> list[Any]:
    rows = batch(spark, broker, subscribe=topic, includeHeaders="true").collect()
    return sorted(rows, key=lambda r: (r.partition, r.offset))


def test_batch_write_round_trip(spark: Any, broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("wb"), 3)
    data = [(f"k{i}".encode() if i % 3 else None, f"v{i}".encode(), i % 3,
             [(f"h{i}", b"x"), ("n", None)] if i % 2 else [])
            for i in range(30)]
    df = spark.createDataFrame(data, SCHEMA)
    df.write.format("samsa").mode("append").option("bootstrap.servers", broker.bootstrap) \
        .option("topic", topic).save()
    rows = _read_back(spark, broker, topic)
    got = sorted(((r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers])
                  for r in rows), key=lambda t: t[1])
    assert got == sorted(((k, v, p, list(h)) for k, v, p, h in data), key=lambda t: t[1])
    assert [r.offset for r in rows if r.partition == 0] == list(range(10))


def test_write_topic_column_and_string_values(spark: Any, broker: BrokerProcess) -> None:
    a = create_topic(broker.bootstrap, unique("wa"), 1)
    b = create_topic(broker.bootstrap, unique("wc"), 1)
    df = spark.createDataFrame([(a, "x", "1"), (b, "y", "2"), (a, "z", None)],
                               "topic string, key string, value string")
    df.write.format("samsa").mode("append").option("bootstrap.servers", broker.bootstrap).save()
    # Rows are written by two tasks at once: their order in the topic is not defined.
    assert sorted((r.key, r.value) for r in _read_back(spark, broker, a)) == [
        (b"x", b"1"), (b"z", None)]
    assert [(r.key, r.value) for r in _read_back(spark, broker, b)] == [(b"y", b"2")]


def test_stream_write_round_trip(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    src = create_topic(broker.bootstrap, unique("ws"), 2)
    dst = create_topic(broker.bootstrap, unique("wd"), 2)
    produce(broker.bootstrap, src, [f"v{i}".encode() for i in range(20)],
            keys=[f"k{i}".encode() for i in range(20)],
            headers=[[("i", str(i).encode())] for i in range(20)])
    df = stream(spark, broker, subscribe=src, startingOffsets="earliest", includeHeaders="true")
    q = (df.selectExpr("key", "upper(cast(value as string)) as value", "partition", "headers")
         .writeStream.format("samsa").option("bootstrap.servers", broker.bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    rows = _read_back(spark, broker, dst)
    got = sorted((r.partition, r.key, r.value, [(h.key, h.value) for h in r.headers])
                 for r in rows)
    assert got == sorted((i % 2, f"k{i}".encode(), f"V{i}".encode(), [("i", str(i).encode())])
                         for i in range(20))


def test_write_without_value_fails_clearly(spark: Any, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        df.write.format("samsa").mode("append").option("bootstrap.servers", broker.bootstrap) \
            .option("topic", "nowhere").save()
