"""Batch reads: starting/ending offsets, timestamps, minPartitions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.spark.conftest import batch, create_topic, produce, unique

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def test_batch_read_with_ending_offsets(spark: Any, broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("bat"), 2)
    produce(broker.bootstrap, topic, [f"{i}".encode() for i in range(40)])  # 20 per partition
    df = batch(spark, broker, subscribe=topic,
               startingOffsets=json.dumps({topic: {"0": 3, "1": -2}}),
               endingOffsets=json.dumps({topic: {"0": 8, "1": -1}}))
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    assert got == [(0, o, f"{2 * o}".encode()) for o in range(3, 8)] + [
        (1, o, f"{2 * o + 1}".encode()) for o in range(20)]
    # defaults: earliest to latest
    assert batch(spark, broker, subscribe=topic).count() == 40


def test_batch_read_by_timestamp_and_min_partitions(spark: Any, broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("ts"), 1)
    base = 1_700_000_000_000
    produce(broker.bootstrap, topic, [f"{i}".encode() for i in range(100)],
            timestamps=[base + 1000 * i for i in range(100)])
    df = batch(spark, broker, subscribe=topic, startingTimestamp=str(base + 10_500),
               endingTimestamp=str(base + 20_000))
    rows = df.collect()
    assert sorted(r.offset for r in rows) == list(range(11, 20))
    assert min(r.timestamp.timestamp() for r in rows) == pytest.approx((base + 11_000) / 1000)

    split = batch(spark, broker, subscribe=topic, minPartitions="4")
    assert split.rdd.getNumPartitions() == 4
    offsets = [r.offset for r in split.collect()]
    assert sorted(offsets) == list(range(100))
