"""A connection's requests take effect in the order sent, as Kafka's (its socket server
handles one request of a connection at a time): a request pipelined behind one that waits
before its effect does not overtake it (samsa.broker.server, ``RequestContext.hold``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import decode_response, encode_request
from tests.broker.test_admin_api_versions import create
from tests.broker.test_group_api_versions import unique
from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import produce
from tests.wire import WireClient


@pytest.fixture
def wire(share_broker: BrokerProcess) -> Iterator[WireClient]:
    c = WireClient(share_broker.bootstrap)
    yield c
    c.close()


def pipelined(c: WireClient, *requests: tuple[ApiKey, int, dict[str, Any]]) -> list[Any]:
    """Send ``requests`` (api key, version, fields) in one write; their answers in order."""
    frames = b""
    for api_key, version, fields in requests:
        c.correlation += 1
        body = build(load_request_schema(api_key, version), fields)
        frames += encode_request(api_key, version, c.correlation, "order-test", body)
    c.send_raw(frames)
    first = c.correlation - len(requests) + 1
    answers = []
    for i, (api_key, version, _) in enumerate(requests):
        cid, answer = decode_response(c.read_frame(), api_key, version)
        assert cid == first + i
        answers.append(answer)
    return answers


def _topic(c: WireClient) -> str:
    name = unique("order")
    (made,) = create(c, 7, {"name": name, "num_partitions": 1}).topics
    assert made.error_code == ErrorCode.none, made
    return name


def test_a_share_offsets_reset_is_seen_by_the_describe_sent_after_it(wire: WireClient) -> None:
    """AlterShareGroupOffsets waits for the coordinator's write before it resets the start
    offsets; a DescribeShareGroupOffsets pipelined behind it must see the reset."""
    topic, group = _topic(wire), unique("order-g")
    altered, described = pipelined(
        wire,
        (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [{
            "topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
        (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
            {"group_id": group, "topics": None}]}))
    assert altered.error_code == ErrorCode.none, altered
    (g,) = described.groups
    assert g.error_code == ErrorCode.none, g
    seen = {(str(t.topic_name), int(p.partition_index)): int(p.start_offset)
            for t in g.topics for p in t.partitions if p.error_code == ErrorCode.none}
    assert seen == {(topic, 0): 0}, g


def _reset(group: str, topic: str, offset: int) -> tuple[ApiKey, int, dict[str, Any]]:
    return (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [{
        "topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": offset}]}]})


def _describe(*groups: str) -> tuple[ApiKey, int, dict[str, Any]]:
    return (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
        {"group_id": g, "topics": None} for g in groups]})


def _starts(described: Any) -> list[list[int]]:
    return [[int(p.start_offset) for t in g.topics for p in t.partitions]
            for g in described.groups]


def test_the_later_of_two_resets_wins(share_broker: BrokerProcess, wire: WireClient) -> None:
    """The first reset creates the group (a coordinator write it waits for); the second,
    of the existing group, needs no wait: it must still take effect second."""
    topic, group = _topic(wire), unique("order-g")
    produce(share_broker.bootstrap, topic, 1, 3)
    first, second = pipelined(wire, _reset(group, topic, 2), _reset(group, topic, 1))
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    (described,) = pipelined(wire, _describe(group))
    assert _starts(described) == [[1]], described


def test_held_requests_take_effect_one_after_another(wire: WireClient) -> None:
    """Two resets that each wait (new groups) and a Describe pipelined: the second reset
    starts after the first, the describe after the second (not only after the first)."""
    topic, one, two = _topic(wire), unique("order-g"), unique("order-g")
    first, second, described = pipelined(wire, _reset(one, topic, 0), _reset(two, topic, 0),
                                         _describe(one, two))
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    assert _starts(described) == [[0], [0]], described
