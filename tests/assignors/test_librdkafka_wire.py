"""Decode the consumer-protocol bytes a real librdkafka client (confluent-kafka) sends.

The live tests run ``confluent_kafka.Consumer`` against :mod:`tests.assignors.fake_broker`
and decode what it puts in JoinGroup and SyncGroup. The stored vectors below were captured the
same way (confluent-kafka 2.16.1 / librdkafka 2.16.0, topics orders:4 and users:2,
``client.rack=rack-a``), so the decoding stays covered where confluent-kafka is absent.
"""

from __future__ import annotations

import time

import pytest

from samsa import TopicPartition
from samsa.assignors import (
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
)

from .fake_broker import Capture, FakeBroker

ORDERS = [TopicPartition("orders", p) for p in range(4)]
USERS = [TopicPartition("users", p) for p in range(2)]

# First JoinGroup (range or cooperative-sticky): subscription v3, empty user data, no owned
# partitions, generation -1, rack.
FIRST_JOIN = bytes.fromhex(
    "00030000000200066f72646572730005757365727300000000" "00000000" "ffffffff" "00067261636b2d61"
)
# Cooperative-sticky rejoin after generation 1: sticky user data (owned + generation 1), owned
# partitions, generation 1, rack.
COOPERATIVE_REJOIN = bytes.fromhex(
    "00030000000200066f72646572730005757365727300000037"
    "0000000200066f726465727300000004000000000000000100000002000000030005757365727300000002"
    "000000000000000100000001"
    "0000000200066f726465727300000004000000000000000100000002000000030005757365727300000002"
    "0000000000000001" "00000001" "00067261636b2d61"
)
# librdkafka's own range assignment (the leader's SyncGroup): assignment v0, empty user data.
RANGE_ASSIGNMENT = bytes.fromhex(
    "0000000000020005757365727300000002000000000000000100066f7264657273000000040000000000000001"
    "000000020000000300000000"
)


def test_stored_first_join() -> None:
    sub = decode_subscription(FIRST_JOIN)
    assert sub.topics == ("orders", "users")
    assert sub.user_data == b""
    assert sub.owned_partitions == ()
    assert sub.generation_id == -1
    assert sub.rack_id == "rack-a"


def test_stored_cooperative_rejoin() -> None:
    sub = decode_subscription(COOPERATIVE_REJOIN)
    assert sub.owned_partitions == (*ORDERS, *USERS)
    assert sub.generation_id == 1
    assert sub.rack_id == "rack-a"
    assert sub.user_data is not None
    assert decode_sticky_user_data(sub.user_data) == ((*ORDERS, *USERS), 1)


def test_stored_range_assignment() -> None:
    assignment = decode_assignment(RANGE_ASSIGNMENT)
    assert sorted(assignment.partitions) == [*ORDERS, *USERS]
    assert assignment.user_data == b""


def run_consumer(strategy: str, joins: int) -> Capture:
    kafka = pytest.importorskip("confluent_kafka")
    capture = Capture(topics={"orders": 4, "users": 2}, joins_wanted=joins)
    with FakeBroker(capture) as port:
        consumer = kafka.Consumer({
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "capture",
            "partition.assignment.strategy": strategy,
            "client.rack": "rack-a",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
            "socket.timeout.ms": 2000,
            "log_level": 0,
        })
        try:
            consumer.subscribe(["orders", "users"])
            deadline = time.monotonic() + 20
            while not capture.done.is_set() and time.monotonic() < deadline:
                consumer.poll(0.05)
        finally:
            consumer.close()
    assert capture.done.is_set(), f"no JoinGroup captured: {capture.joins}"
    return capture


@pytest.mark.timeout(60)
def test_live_range_join_and_assignment() -> None:
    capture = run_consumer("range", joins=1)
    sub = decode_subscription(capture.joins[0]["range"])
    assert (sub.topics, sub.owned_partitions, sub.rack_id) == (("orders", "users"), (), "rack-a")
    if capture.syncs:  # the leader's assignment, encoded by librdkafka
        (assignment_bytes,) = capture.syncs[0].values()
        assert sorted(decode_assignment(assignment_bytes).partitions) == [*ORDERS, *USERS]


@pytest.mark.timeout(60)
def test_live_cooperative_rejoin_reports_owned_partitions() -> None:
    capture = run_consumer("cooperative-sticky", joins=2)
    first = decode_subscription(capture.joins[0]["cooperative-sticky"])
    again = decode_subscription(capture.joins[1]["cooperative-sticky"])
    assert first.owned_partitions == () and first.generation_id == -1
    assert sorted(again.owned_partitions) == [*ORDERS, *USERS]
    assert again.generation_id == 1 and again.rack_id == "rack-a"
    assert again.user_data is not None
    sticky = decode_sticky_user_data(again.user_data)
    assert sorted(sticky.partitions) == [*ORDERS, *USERS] and sticky.generation == 1
