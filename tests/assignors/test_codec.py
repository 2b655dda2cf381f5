"""Consumer protocol codecs: round trips, hand-built Java layouts, kafka-python vectors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa import TopicPartition
from samsa.assignors import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)


def string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def partitions_array(groups: list[tuple[str, list[int]]]) -> bytes:
    out = struct.pack(">i", len(groups))
    for topic, ps in groups:
        out += string(topic) + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out


def java_subscription(version: int) -> bytes:
    """ConsumerProtocolSubscription laid out by hand from Kafka's message schema."""
    out = struct.pack(">h", version) + struct.pack(">i", 2) + string("orders") + string("users")
    out += struct.pack(">i", 3) + b"abc"  # user data
    if version >= 1:
        out += partitions_array([("orders", [0, 3]), ("users", [1])])
    if version >= 2:
        out += struct.pack(">i", 42)
    if version >= 3:
        out += string("rack-a")
    return out


SUB = Subscription(
    topics=("orders", "users"),
    user_data=b"abc",
    owned_partitions=(TopicPartition("orders", 0), TopicPartition("orders", 3),
                      TopicPartition("users", 1)),
    generation_id=42,
    rack_id="rack-a",
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_matches_java_layout(version: int) -> None:
    data = java_subscription(version)
    assert encode_subscription(SUB, version) == data
    decoded = decode_subscription(data)
    assert decoded.topics == SUB.topics and decoded.user_data == b"abc"
    assert decoded.owned_partitions == (SUB.owned_partitions if version >= 1 else ())
    assert decoded.generation_id == (42 if version >= 2 else -1)
    assert decoded.rack_id == ("rack-a" if version >= 3 else None)


def test_newer_subscription_version_reads_known_prefix() -> None:
    future = struct.pack(">h", 9) + java_subscription(3)[2:] + b"\x00\x07future!"
    assert decode_subscription(future) == SUB


def test_assignment_matches_java_layout() -> None:
    data = (struct.pack(">h", 3) + partitions_array([("orders", [1, 2]), ("users", [0])])
            + struct.pack(">i", -1))
    assignment = Assignment((TopicPartition("orders", 1), TopicPartition("orders", 2),
                             TopicPartition("users", 0)))
    assert encode_assignment(assignment) == data
    assert decode_assignment(data) == assignment
    assert decode_assignment(b"") == Assignment(())
    newer = struct.pack(">h", 7) + data[2:] + b"extra"
    assert decode_assignment(newer) == assignment


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\xff\xff" + java_subscription(3)[2:], java_subscription(3)[:-3],
     b"\x00\x00\x00\x00\x00\x01\xff\xff"],
)
def test_bad_subscription_bytes_raise_clear_error(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_bad_assignment_bytes_raise_clear_error() -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x05")


topics = st.text(alphabet="abcxyz._-", min_size=1, max_size=8)
tp_lists = st.lists(st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1)), max_size=6,
                    unique=True).map(lambda xs: tuple(sorted(xs)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(topics, max_size=5, unique=True).map(tuple),
    st.none() | st.binary(max_size=20),
    tp_lists,
    st.integers(-1, 2**31 - 1),
    st.none() | topics,
)
def test_subscription_round_trip(
    ts: tuple[str, ...], user_data: bytes | None, owned: tuple[TopicPartition, ...],
    generation: int, rack: str | None,
) -> None:
    sub = Subscription(ts, user_data, owned, generation, rack)
    assert decode_subscription(encode_subscription(sub)) == sub


@settings(max_examples=200, deadline=None)
@given(tp_lists, st.none() | st.binary(max_size=20), st.integers(0, 3))
def test_assignment_round_trip(
    parts: tuple[TopicPartition, ...], user_data: bytes | None, version: int
) -> None:
    assignment = Assignment(parts, user_data)
    assert decode_assignment(encode_assignment(assignment, version)) == assignment


@settings(max_examples=200, deadline=None)
@given(tp_lists, st.none() | st.integers(-1, 2**31 - 1))
def test_sticky_user_data_round_trip(parts: tuple[TopicPartition, ...], gen: int | None) -> None:
    decoded = decode_sticky_user_data(encode_sticky_user_data(parts, gen))
    assert decoded.partitions == parts and decoded.generation == gen


# Bytes written by kafka-python 3.0.12 (StickyPartitionAssignor._metadata(["t1", "t0"],
# [t0-0, t0-2, t1-1], generation=7).encode()): a v0 subscription whose sticky user data carries
# kafka-python 3's int16 version header in front of Java's StickyAssignor struct.
KAFKA_PYTHON_3_STICKY_SUBSCRIPTION = bytes.fromhex(
    "00000000000200027431000274300000002600010000000200027430000000020000000000000002"
    "000274310000000100000001" "00000007"
)
# The same user data as Java's StickyAssignor writes it (no version prefix).
JAVA_STICKY_USER_DATA = bytes.fromhex(
    "00000002000274300000000200000000000000020002743100000001000000010000" "0007"
)


def test_kafka_python_sticky_vectors() -> None:
    sub = decode_subscription(KAFKA_PYTHON_3_STICKY_SUBSCRIPTION)
    assert sub.topics == ("t1", "t0")
    expected = (TopicPartition("t0", 0), TopicPartition("t0", 2), TopicPartition("t1", 1))
    assert sub.user_data is not None
    assert decode_sticky_user_data(sub.user_data) == (expected, 7)
    assert encode_sticky_user_data(expected, 7) == JAVA_STICKY_USER_DATA
    assert decode_sticky_user_data(JAVA_STICKY_USER_DATA) == (expected, 7)
    v0 = JAVA_STICKY_USER_DATA[:-4]
    assert decode_sticky_user_data(v0) == (expected, None)


def test_live_kafka_python_sticky_encoding() -> None:
    sticky = pytest.importorskip("kafka.coordinator.assignors.sticky.sticky_assignor")
    user_data_mod = pytest.importorskip("kafka.coordinator.assignors.sticky.user_data")
    from kafka.structs import TopicPartition as KafkaTP

    owned = [KafkaTP("t0", 0), KafkaTP("t0", 2), KafkaTP("t1", 1)]
    sub = sticky.StickyPartitionAssignor._metadata(["t1", "t0"], owned, 7)
    assert sub.encode() == KAFKA_PYTHON_3_STICKY_SUBSCRIPTION
    java_form = user_data_mod.StickyAssignorUserData(
        [("t0", [0, 2]), ("t1", [1])], 7).encode(header=False)
    assert java_form == JAVA_STICKY_USER_DATA
    # And kafka-python reads what samsa writes, given the version it cannot infer.
    ours = encode_sticky_user_data([TopicPartition(t, p) for t, p in owned], 7)
    back = user_data_mod.StickyAssignorUserData.decode(ours, version=1, header=False)
    assert back.generation == 7


def test_live_kafka_python_subscription_and_assignment() -> None:
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    theirs = metadata.ConsumerProtocolSubscription(
        version=3, topics=["orders", "users"], user_data=b"abc",
        owned_partitions=[("orders", [0, 3]), ("users", [1])], generation_id=42,
        rack_id="rack-a",
    ).encode()
    assert theirs == java_subscription(3)
    assert decode_subscription(theirs) == SUB
    assignment = metadata.ConsumerProtocolAssignment(
        version=1, assigned_partitions=[("orders", [5])], user_data=b"u").encode()
    assert decode_assignment(assignment) == Assignment((TopicPartition("orders", 5),), b"u")


def test_bad_sticky_user_data() -> None:
    for data in (b"", b"\x00\x00", b"\x00\x00\x00\x05\x00", JAVA_STICKY_USER_DATA + b"xx"):
        with pytest.raises(ConsumerProtocolError):
            decode_sticky_user_data(data)
