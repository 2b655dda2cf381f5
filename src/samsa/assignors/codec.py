"""Consumer protocol codecs: Subscription / Assignment v0-v3 and sticky user data.

The bytes are what Kafka's Java client and librdkafka put in JoinGroup protocol metadata and
SyncGroup assignments: an int16 version, then the (non-flexible) struct of that version. As in
Kafka, a version newer than we know is read as the newest known one (its known prefix).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kio.schema.consumer_protocol_assignment import v0 as a0
from kio.schema.consumer_protocol_assignment import v1 as a1
from kio.schema.consumer_protocol_assignment import v2 as a2
from kio.schema.consumer_protocol_assignment import v3 as a3
from kio.schema.consumer_protocol_assignment.v0 import data as a0data
from kio.schema.consumer_protocol_assignment.v1 import data as a1data
from kio.schema.consumer_protocol_assignment.v2 import data as a2data
from kio.schema.consumer_protocol_assignment.v3 import data as a3data
from kio.schema.consumer_protocol_subscription import v0 as s0
from kio.schema.consumer_protocol_subscription import v1 as s1
from kio.schema.consumer_protocol_subscription import v2 as s2
from kio.schema.consumer_protocol_subscription import v3 as s3
from kio.schema.consumer_protocol_subscription.v1 import data as s1data
from kio.schema.consumer_protocol_subscription.v2 import data as s2data
from kio.schema.consumer_protocol_subscription.v3 import data as s3data
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32

from samsa import TopicPartition
from samsa.assignors.interface import Assignment, Subscription

__all__ = [
    "ASSIGNMENT_VERSION",
    "SUBSCRIPTION_VERSION",
    "ConsumerProtocolError",
    "StickyUserData",
    "decode_assignment",
    "decode_sticky_groups",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_sticky_user_data",
    "encode_subscription",
]

SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3

_SUBSCRIPTION_SCHEMAS: tuple[Any, ...] = (
    s0.ConsumerProtocolSubscription,
    s1.ConsumerProtocolSubscription,
    s2.ConsumerProtocolSubscription,
    s3.ConsumerProtocolSubscription,
)
_ASSIGNMENT_SCHEMAS: tuple[Any, ...] = (
    a0.ConsumerProtocolAssignment,
    a1.ConsumerProtocolAssignment,
    a2.ConsumerProtocolAssignment,
    a3.ConsumerProtocolAssignment,
)
_SUB_TP: tuple[Any, ...] = (
    None,
    s1data.TopicPartition,
    s2data.TopicPartition,
    s3data.TopicPartition,
)
_ASG_TP: tuple[Any, ...] = (
    a0data.TopicPartition,
    a1data.TopicPartition,
    a2data.TopicPartition,
    a3data.TopicPartition,
)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """Bytes that are not a valid consumer protocol subscription, assignment or user data."""


def _group(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Group partitions by topic, topics in order of first appearance."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return list(by_topic.items())


def _ungroup(entries: Iterable[Any]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(e.topic, int(p)) for e in entries for p in e.partitions)


def _encode(schema: Any, version: int, value: Any) -> bytes:
    buf = io.BytesIO()
    buf.write(_I16.pack(version))
    entity_writer(schema)(buf, value)
    return buf.getvalue()


def _decode(schemas: Sequence[Any], data: bytes, what: str) -> tuple[int, Any]:
    if len(data) < 2:
        raise ConsumerProtocolError(f"{what}: {len(data)} bytes, too short for a version")
    version = _I16.unpack_from(data)[0]
    if version < 0:
        raise ConsumerProtocolError(f"{what}: unsupported version {version}")
    read_version = min(version, len(schemas) - 1)
    try:
        value, _ = entity_reader(schemas[read_version])(bytes(data), 2)
    except SerialError as exc:
        raise ConsumerProtocolError(f"{what} v{version}: {exc}") from exc
    return read_version, value


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """Encode a subscription at ``version`` (fields the version lacks are dropped)."""
    if not 0 <= version <= SUBSCRIPTION_VERSION:
        raise ValueError(f"subscription version {version} not in 0..{SUBSCRIPTION_VERSION}")
    fields: dict[str, Any] = {"topics": tuple(sub.topics), "user_data": sub.user_data}
    if version >= 1:
        tp = _SUB_TP[version]
        fields["owned_partitions"] = tuple(
            tp(topic=t, partitions=tuple(i32(p) for p in ps))
            for t, ps in _group(sub.owned_partitions)
        )
    if version >= 2:
        fields["generation_id"] = i32(sub.generation_id)
    if version >= 3:
        fields["rack_id"] = sub.rack_id
    schema = _SUBSCRIPTION_SCHEMAS[version]
    return _encode(schema, version, schema(**fields))


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """Decode JoinGroup protocol metadata of protocol type "consumer"."""
    version, value = _decode(_SUBSCRIPTION_SCHEMAS, data, "subscription")
    return Subscription(
        topics=tuple(value.topics),
        user_data=value.user_data,
        owned_partitions=_ungroup(value.owned_partitions) if version >= 1 else (),
        generation_id=int(value.generation_id) if version >= 2 else -1,
        rack_id=value.rack_id if version >= 3 else None,
        group_instance_id=group_instance_id,
    )


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    """Encode an assignment (v0-v3 share one layout)."""
    if not 0 <= version <= ASSIGNMENT_VERSION:
        raise ValueError(f"assignment version {version} not in 0..{ASSIGNMENT_VERSION}")
    tp = _ASG_TP[version]
    value = _ASSIGNMENT_SCHEMAS[version](
        assigned_partitions=tuple(
            tp(topic=t, partitions=tuple(i32(p) for p in ps))
            for t, ps in _group(assignment.partitions)
        ),
        user_data=assignment.user_data,
    )
    return _encode(_ASSIGNMENT_SCHEMAS[version], version, value)


def decode_assignment(data: bytes) -> Assignment:
    """Decode a SyncGroup member assignment; empty bytes mean an empty assignment."""
    if not data:
        return Assignment(())
    _, value = _decode(_ASSIGNMENT_SCHEMAS, data, "assignment")
    return Assignment(_ungroup(value.assigned_partitions), value.user_data)


# --- StickyAssignor user data (Java StickyAssignor / kafka-python StickyPartitionAssignor) ---
# Java: no version prefix; v1 = [topic string, partitions [int32]] array, then generation
# int32; v0 lacks the generation; readers try v1 and fall back to v0. kafka-python 3.x writes
# the same struct behind an int16 version (its ApiData header); we read that form too.


class StickyUserData(tuple[tuple[TopicPartition, ...], int | None]):
    """(previous assignment, generation or None for v0 data)."""

    __slots__ = ()

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        return self[0]

    @property
    def generation(self) -> int | None:
        return self[1]


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """Encode sticky user data: v1 with a generation, v0 when ``generation`` is None."""
    out = bytearray()
    groups = _group(partitions)
    out += _I32.pack(len(groups))
    for topic, ps in groups:
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    """Decode sticky user data: Java's v1/v0, or kafka-python 3.x's version-prefixed form."""
    groups, generation = decode_sticky_groups(data)
    parts = tuple(TopicPartition(topic, p) for topic, ps in groups for p in ps)
    return StickyUserData((parts, generation))


PartitionGroups = list[tuple[str, tuple[int, ...]]]


def decode_sticky_groups(
    data: bytes, names: dict[bytes, str] | None = None
) -> tuple[PartitionGroups, int | None]:
    """Like :func:`decode_sticky_user_data`, but partitions stay grouped by topic.

    ``names`` caches decoded topic names across calls (the leader decodes one blob per member).
    """
    raw = bytes(data)
    names = {} if names is None else names
    try:
        groups, pos = _read_groups(raw, 0, names)
        if pos == len(raw):
            return groups, None
        if pos + 4 == len(raw):
            return groups, _I32.unpack_from(raw, pos)[0]
        raise ConsumerProtocolError(f"sticky user data: {len(raw) - pos} trailing bytes")
    except ConsumerProtocolError as first:
        if len(raw) < 2 or _I16.unpack_from(raw)[0] not in (0, 1):
            raise first from None
        version = _I16.unpack_from(raw)[0]
        try:
            groups, pos = _read_groups(raw, 2, names)
        except ConsumerProtocolError:
            raise first from None
        if version == 0 and pos == len(raw):
            return groups, None
        if version == 1 and pos + 4 == len(raw):
            return groups, _I32.unpack_from(raw, pos)[0]
        raise first from None


def _read_groups(data: bytes, pos: int, names: dict[bytes, str]) -> tuple[PartitionGroups, int]:
    """Read [topic string, partitions [int32]] at ``pos``; return the groups and the end."""
    size = len(data)
    unpack_i16, unpack_i32 = _I16.unpack_from, _I32.unpack_from
    arrays: dict[int, Callable[[bytes, int], tuple[int, ...]]] = {}
    groups: PartitionGroups = []
    append = groups.append
    try:
        (count,) = unpack_i32(data, pos)
        pos += 4
        if count < 0 or count > size:
            raise ConsumerProtocolError("sticky user data: bad topic count")
        for _ in range(count):
            (length,) = unpack_i16(data, pos)
            end = pos + 2 + length
            if length < 0 or end + 4 > size:
                raise ConsumerProtocolError("sticky user data: bad topic name")
            key = data[pos + 2 : end]
            topic = names.get(key)
            if topic is None:
                topic = names[key] = key.decode()
            (n,) = unpack_i32(data, end)
            pos = end + 4
            if n < 0 or pos + 4 * n > size:
                raise ConsumerProtocolError("sticky user data: bad partition array")
            read = arrays.get(n)
            if read is None:
                read = arrays[n] = struct.Struct(f">{n}i").unpack_from
            append((topic, read(data, pos)))
            pos += 4 * n
    except (struct.error, UnicodeDecodeError) as exc:
        raise ConsumerProtocolError(f"sticky user data: {exc}") from exc
    return groups, pos
