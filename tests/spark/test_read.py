"""Reading planned ranges directly (no Spark session): same range, same rows."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from samsa.spark.options import SourceOptions
from samsa.spark.planning import OffsetRange
from samsa.spark.stream import SamsaStreamReader
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import create_topic, produce, unique

pytestmark = pytest.mark.spark


def _reader(broker: BrokerProcess, topic: str, **extra: str) -> SamsaStreamReader:
    opts = {"bootstrap.servers": broker.bootstrap, "subscribe": topic,
            "includeheaders": "true", **{k.lower(): v for k, v in extra.items()}}
    return SamsaStreamReader(SourceOptions.parse(opts, batch=False))


def _table(reader: SamsaStreamReader, r: OffsetRange) -> pa.Table:
    return pa.Table.from_batches(list(reader.read(r)))


def test_same_range_same_rows_whatever_the_fetch_size(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("replay"), 2)
    produce(broker.bootstrap, topic, [b"v%03d" % i * 10 for i in range(300)],
            keys=[b"k%d" % i if i % 3 else None for i in range(300)],
            headers=[[("i", b"%d" % i)] if i % 2 else [] for i in range(300)],
            batch_size=2000)
    reader = _reader(broker, topic, minPartitions="5")
    start = reader.initialOffset()
    assert start == {topic: {"0": 150, "1": 150}}  # startingOffsets defaults to latest
    begin = {topic: {"0": 7, "1": 0}}
    end = reader.latestOffset(begin, reader.getDefaultReadLimit())
    assert end == {topic: {"0": 150, "1": 150}}
    ranges = reader.partitions(begin, end)
    assert len(ranges) >= 5
    tables = [_table(reader, r) for r in ranges]
    assert [_table(reader, r) for r in ranges] == tables  # replay: identical rows
    tiny = _reader(broker, topic, minPartitions="5", **{"fetch.max.bytes": "300"})
    assert [_table(tiny, r) for r in ranges] == tables  # many small fetches, same rows
    rows = pa.concat_tables(tables).to_pylist()
    assert sorted((r["partition"], r["offset"]) for r in rows) == (
        [(0, o) for o in range(7, 150)] + [(1, o) for o in range(150)])
    for r in rows:
        i = 2 * r["offset"] + r["partition"]
        assert r["value"] == b"v%03d" % i * 10
        assert r["key"] == (b"k%d" % i if i % 3 else None)
        assert r["headers"] == ([{"key": "i", "value": b"%d" % i}] if i % 2 else [])
    reader.stop()
    tiny.stop()


def test_rate_limit_and_available_now_target(broker: BrokerProcess) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    topic = create_topic(broker.bootstrap, unique("target"), 1)
    produce(broker.bootstrap, topic, [b"x"] * 10)
    reader = _reader(broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="4")
    assert reader.getDefaultReadLimit() == ReadMaxRows(4)
    reader.prepareForTriggerAvailableNow()
    produce(broker.bootstrap, topic, [b"late"] * 5)  # after the target: not in this run
    offsets = [reader.initialOffset()]
    while True:
        nxt = reader.latestOffset(offsets[-1], ReadMaxRows(4))
        if nxt == offsets[-1]:
            break
        offsets.append(nxt)
    assert [json.dumps(o) for o in offsets] == [
        json.dumps({topic: {"0": n}}) for n in (0, 4, 8, 10)]
    assert reader.latestOffset(offsets[-1], ReadAllAvailable()) == offsets[-1]
    reader.stop()


def test_min_offsets_per_trigger_and_max_trigger_delay(broker: BrokerProcess) -> None:
    import time

    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMinRows

    topic = create_topic(broker.bootstrap, unique("minrows"), 1)
    reader = _reader(broker, topic, startingOffsets="earliest", minOffsetsPerTrigger="5",
                     maxTriggerDelay="1s")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMinRows(5)
    start = reader.initialOffset()
    produce(broker.bootstrap, topic, [b"x"] * 2)
    first = reader.latestOffset(start, limit)  # the first trigger is never delayed
    assert first == {topic: {"0": 2}}
    produce(broker.bootstrap, topic, [b"x"] * 2)
    assert reader.latestOffset(first, limit) == first  # 2 < 5: wait
    assert reader.latestOffset(first, ReadAllAvailable()) == {topic: {"0": 4}}
    produce(broker.bootstrap, topic, [b"x"] * 3)
    second = reader.latestOffset(first, limit)
    assert second == {topic: {"0": 7}}  # 5 available
    produce(broker.bootstrap, topic, [b"x"])
    assert reader.latestOffset(second, limit) == second
    time.sleep(1.1)  # maxTriggerDelay passed: read what is there
    assert reader.latestOffset(second, limit) == {topic: {"0": 8}}
    reader.stop()
