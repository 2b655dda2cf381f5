"""Option validation (pure) and its messages through Spark; planning helpers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa import TopicPartition
from samsa.spark.options import OptionError, SinkOptions, SourceOptions
from samsa.spark.planning import plan_ranges, rate_limit
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import batch, stream

BOOT = {"bootstrap.servers": "127.0.0.1:9"}


def _parse(batch_query: bool = False, **opts: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, **{k.lower(): v for k, v in opts.items()}},
                               batch=batch_query)


@pytest.mark.parametrize(("opts", "message"), [
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "exclusive, but got subscribe, assign"),
    ({"subscribe": "a", "subscribePattern": "a.*"}, "exclusive"),
    ({}, "one of the options subscribe, subscribePattern, assign is required"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": 1'}, "startingOffsets: malformed JSON"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "partition 'x' of topic 'a'"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": "1"}}'}, "must be an integer"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "-2 for earliest"),
    ({"subscribe": "a", "startingOffsets": "first"}, "earliest, latest or JSON"),
    ({"assign": "[0]"}, "assign must be a JSON object"),
    ({"assign": '{"a": [0'}, "assign: malformed JSON"),
    ({"subscribePattern": "("}, "invalid regex"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "at least 1"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "true or false"),
    ({"subscribe": "a", "endingOffsets": "latest"}, "batch queries only"),
    ({"subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "1"}, "exclusive"),
])
def test_bad_stream_options(opts: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(")):
        _parse(**opts)


def test_bad_batch_options() -> None:
    with pytest.raises(OptionError, match="startingOffsets=latest is not allowed"):
        _parse(True, subscribe="a", startingOffsets="latest")
    with pytest.raises(OptionError, match=r"earliest \(-2\) is not allowed as a batch end"):
        _parse(True, subscribe="a", endingOffsets='{"a": {"0": -2}}')
    with pytest.raises(OptionError, match=r"bootstrap\.servers is required"):
        SourceOptions.parse({"subscribe": "a"}, batch=True)
    with pytest.raises(OptionError, match=r"compression\.type"):
        SinkOptions.parse({**BOOT, "compression.type": "brotli"})


def test_good_options() -> None:
    o = _parse(subscribe="b, a", startingOffsets='{"a": {"0": 5, "1": -2}}',
               maxOffsetsPerTrigger="10", includeHeaders="true", groupId="g")
    assert o.topics == ("a", "b") and o.selector == "subscribe"
    assert o.starting.kind == "offsets"
    assert o.starting.offsets == {TopicPartition("a", 0): 5, TopicPartition("a", 1): -2}
    assert (o.max_offsets_per_trigger, o.include_headers, o.group_id) == (10, True, "g")
    a = _parse(assign=json.dumps({"t": [1, 0]}))
    assert a.assigned == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert _parse(subscribePattern="t-.*").matches("t-1")
    assert not _parse(subscribePattern="t-.*").matches("xt-1")


def test_rate_limit_is_proportional_and_rounds_small_shares_up() -> None:
    a, b, c = (TopicPartition("t", i) for i in range(3))
    start = {a: 0, b: 100, c: 7}
    latest = {a: 1000, b: 110, c: 7}
    assert rate_limit(start, latest, 100) == {a: 99, b: 101, c: 7}
    assert rate_limit(start, latest, 5000) == latest


def test_plan_ranges_min_partitions() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    ranges = plan_ranges({a: 0, b: 10}, {a: 90, b: 20}, 4)
    # Spark's rule: round(90 / 100 * 4) = 4 parts, and at least one for the small range.
    assert [(r.partition, r.start, r.until) for r in ranges] == [
        (0, 0, 22), (0, 22, 45), (0, 45, 67), (0, 67, 90), (1, 10, 20)]
    assert plan_ranges({a: 5}, {a: 5}, 4) == []


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_bad_options_through_spark(spark: Any, broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match="exclusive"):
        batch(spark, broker, subscribe="a", subscribePattern="a.*").collect()
    with pytest.raises(Exception, match="startingOffsets: malformed JSON"):
        stream(spark, broker, subscribe="a", startingOffsets="{oops").writeStream \
            .format("memory").queryName("bad_json").start().awaitTermination(60)


def test_durations() -> None:
    from samsa.spark.options import parse_duration_ms

    assert [parse_duration_ms(t, "d") for t in ("15m", "10s", "500ms", "250", "1h")] == [
        900_000, 10_000, 500, 250, 3_600_000]
    with pytest.raises(OptionError, match="maxTriggerDelay must be a duration"):
        _parse(subscribe="a", maxTriggerDelay="soon")
    assert _parse(subscribe="a", minOffsetsPerTrigger="3", maxTriggerDelay="2s") \
        .max_trigger_delay_ms == 2000
