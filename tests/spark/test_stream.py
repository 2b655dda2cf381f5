"""Structured Streaming reads from a samsa broker (one local[2] session)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from samsa import Admin
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import create_topic, produce, stream, unique

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _run_available_now(df: Any, out: Path, checkpoint: Path) -> Any:
    q = (df.writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(120), "availableNow query did not finish"
    assert q.exception() is None, q.exception()
    return q


def _data_batches(q: Any) -> list[int]:
    return [int(p["numInputRows"]) for p in q.recentProgress if int(p["numInputRows"])]


def test_available_now_restart_exactly_once(spark: Any, broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("once"), 3)
    produce(broker.bootstrap, topic, [f"a{i}".encode() for i in range(60)])
    out, ck = tmp_path / "out", tmp_path / "ck"
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    _run_available_now(df, out, ck)
    assert spark.read.parquet(str(out)).count() == 60

    produce(broker.bootstrap, topic, [f"b{i}".encode() for i in range(45)])
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    q = _run_available_now(df, out, ck)
    assert sum(_data_batches(q)) == 45, "the restart re-read or skipped records"

    rows = spark.read.parquet(str(out)).collect()
    ids = [(r.topic, r.partition, r.offset) for r in rows]
    assert len(ids) == len(set(ids)) == 105
    assert sorted(r.value.decode() for r in rows) == sorted(
        [f"a{i}" for i in range(60)] + [f"b{i}" for i in range(45)])
    per_partition = {p: sorted(o for t, pp, o in ids if pp == p) for p in range(3)}
    assert all(offs == list(range(35)) for offs in per_partition.values())
    assert {r.timestampType for r in rows} == {0}
    assert all(r.timestamp is not None for r in rows)


def test_max_offsets_per_trigger(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("rate"), 2)
    produce(broker.bootstrap, topic, [b"x"] * 100)  # 50 per partition
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="20")
    q = _run_available_now(df, tmp_path / "out", tmp_path / "ck")
    assert _data_batches(q) == [20] * 5
    assert spark.read.parquet(str(tmp_path / "out")).count() == 100


def test_max_offsets_rounds_small_shares_up(spark: Any, broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("skew"), 2)
    produce(broker.bootstrap, topic, [b"x"] * 30, partition=0)
    produce(broker.bootstrap, topic, [b"y"] * 2, partition=1)
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="10")
    q = _run_available_now(df, tmp_path / "out", tmp_path / "ck")
    # 10 * 2/32 < 1 rounds up to 1 for partition 1; 10 * 30/32 rounds down to 9.
    first = q.recentProgress[0]
    assert int(first["numInputRows"]) == 10
    end = first["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    assert end == {topic: {"0": 9, "1": 1}}
    assert spark.read.parquet(str(tmp_path / "out")).count() == 32


def test_assign_and_starting_offsets_json(spark: Any, broker: BrokerProcess,
                                          tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("assign"), 3)
    produce(broker.bootstrap, topic, [f"{i}".encode() for i in range(30)])
    df = stream(spark, broker, assign=json.dumps({topic: [0, 2]}),
                startingOffsets=json.dumps({topic: {"0": 4, "2": -2}}))
    _run_available_now(df, tmp_path / "out", tmp_path / "ck")
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, o) for o in range(4, 10)] + [(2, o) for o in range(10)]


def test_subscribe_pattern_and_new_topic(spark: Any, broker: BrokerProcess) -> None:
    prefix = unique("pat")
    a = create_topic(broker.bootstrap, f"{prefix}-a", 1)
    create_topic(broker.bootstrap, f"{prefix}x-other", 1)
    produce(broker.bootstrap, a, [b"a"] * 5)
    produce(broker.bootstrap, f"{prefix}x-other", [b"no"] * 5)
    df = stream(spark, broker, subscribePattern=f"{prefix}-.*", startingOffsets="latest")
    name = prefix.replace("-", "_")
    q = df.writeStream.format("memory").queryName(name).start()
    try:
        q.processAllAvailable()
        produce(broker.bootstrap, a, [b"a2"] * 3)
        b = create_topic(broker.bootstrap, f"{prefix}-b", 2)
        produce(broker.bootstrap, b, [b"b"] * 4)  # before the query sees topic b
        q.processAllAvailable()
        _wait_rows(spark, name, 7)
        rows = spark.sql(f"select topic, value from {name}").collect()
        assert sorted((r.topic, bytes(r.value)) for r in rows) == sorted(
            [(a, b"a2")] * 3 + [(b, b"b")] * 4)
    finally:
        q.stop()


def _wait_rows(spark: Any, table: str, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while spark.sql(f"select * from {table}").count() < n:
        assert time.monotonic() < deadline, f"fewer than {n} rows in {table}"
        time.sleep(0.5)


def test_partition_added_mid_stream(spark: Any, broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("grow"), 1)
    produce(broker.bootstrap, topic, [b"p0"] * 3)
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    name = topic.replace("-", "_")
    q = df.writeStream.format("memory").queryName(name).start()
    try:
        q.processAllAvailable()
        _wait_rows(spark, name, 3)
        with Admin(broker.bootstrap) as admin:
            admin.create_partitions({topic: 2})
        produce(broker.bootstrap, topic, [b"p1"] * 4, partition=1)
        produce(broker.bootstrap, topic, [b"p0"] * 2, partition=0)
        deadline = time.monotonic() + 60
        while spark.sql(f"select * from {name}").count() < 9:
            assert time.monotonic() < deadline, "records of the new partition never arrived"
            q.processAllAvailable()
            time.sleep(0.2)
        rows = spark.sql(f"select partition, offset from {name}").collect()
        assert sorted((r.partition, r.offset) for r in rows) == (
            [(0, o) for o in range(5)] + [(1, o) for o in range(4)])
    finally:
        q.stop()


def test_include_headers_and_keys(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("hdr"), 1)
    produce(broker.bootstrap, topic, [b"v1", b"v2", None],  # type: ignore[list-item]
            keys=[b"k1", None, b"k3"],
            headers=[[("a", b"1"), ("b", None)], [], [("c", b"3")]])
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                includeHeaders="true")
    assert "headers" in df.columns
    _run_available_now(df, tmp_path / "out", tmp_path / "ck")
    rows = sorted(spark.read.parquet(str(tmp_path / "out")).collect(), key=lambda r: r.offset)
    assert [(r.key, r.value) for r in rows] == [(b"k1", b"v1"), (None, b"v2"), (b"k3", None)]
    assert [[(h.key, h.value) for h in r.headers] for r in rows] == [
        [("a", b"1"), ("b", None)], [], [("c", b"3")]]


def test_group_id_commits_offsets(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("lag"), 2)
    produce(broker.bootstrap, topic, [b"x"] * 10)
    group = unique("pipeline")
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest", groupId=group)
    _run_available_now(df, tmp_path / "out", tmp_path / "ck")
    from samsa import TopicPartition

    deadline = time.monotonic() + 30
    with Admin(broker.bootstrap) as admin:
        while True:
            committed = admin.list_consumer_group_offsets(group)
            if committed == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}:
                break
            assert time.monotonic() < deadline, f"group offsets: {committed}"
            time.sleep(0.2)
