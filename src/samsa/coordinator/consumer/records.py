"""Consumer-group (KIP-848) records of ``__consumer_offsets``, typed, with Kafka 4.x codecs.

Keys are non-flexible: an int16 version naming the record type, then int16-length strings.
Values are version 0 of flexible schemas (compact strings and arrays, uuids as 16 bytes,
tagged fields), exactly as Kafka's ``group-coordinator`` message JSON files define them:

==  ==========================================  =========================================
 3  ConsumerGroupMetadata {group}               {epoch; tag 0: metadata hash}
 4  ConsumerGroupPartitionMetadata {group}      (Kafka < 4.1; read and ignored)
 5  ConsumerGroupMemberMetadata {group, member}  {instance, rack, client id/host, topic
                                                names, regex, rebalance timeout, assignor;
                                                tag 0: classic member metadata}
 6  ConsumerGroupTargetAssignmentMetadata       {assignment epoch; tag 0: assignment
                                                timestamp (Kafka 4.3)}
 7  ConsumerGroupTargetAssignmentMember         {[topic id, partitions]}
 8  ConsumerGroupCurrentMemberAssignment        {epoch, previous epoch, state, assigned,
                                                pending revocation; each topic's tag 0:
                                                assignment epochs (Kafka 4.3)}
16  ConsumerGroupRegularExpression {group, re}  {topics, version, timestamp}
==  ==========================================  =========================================

Kafka 4.3 (KIP-1251) added to the ``TopicPartitions`` struct of the current member
assignment a tagged field, still in value version 0: tag 0 ``AssignmentEpochs``, a nullable
compact ``[]int32`` aligned with ``Partitions`` (the epoch at which each partition was
assigned to the member). samsa always writes it; records of Kafka 4.0-4.2 lack it and are
read with ``assignment_epochs=None``.

Kafka 4.3 (KAFKA-20266, for KIP-1263's batching) also gave the target assignment metadata
value a tagged int64, tag 0: when the last target assignment computation finished (0 when
absent: a record of Kafka 4.0-4.2, or a group upgraded from the classic protocol).

A ``None`` value is a tombstone. Unknown tagged fields are skipped on read.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, replace

from samsa.coordinator.events import TopicPartitions

METADATA_KEY = 3
PARTITION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_METADATA_KEY = 6
TARGET_MEMBER_KEY = 7
CURRENT_ASSIGNMENT_KEY = 8
REGEX_KEY = 16

#: Record types this module decodes (4 is decoded to be skipped).
KEY_VERSIONS = frozenset({3, 4, 5, 6, 7, 8, 16})


class ConsumerRecordDecodeError(ValueError):
    """The bytes are not a valid consumer-group record."""


# --------------------------------------------------------------------------- keys


@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionKey:
    group: str
    regex: str


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """Tag 0 of the member metadata value: set for a member that speaks the classic
    protocol inside a consumer group (its JoinGroup session timeout and protocols)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    #: when the computation of this target finished (ms); 0 = unknown
    assignment_timestamp: int = 0


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class AssignedTopicPartitions:
    """``TopicPartitions`` of the current member assignment: ``assignment_epochs`` (tag 0,
    Kafka 4.3) is aligned with ``partitions``; ``None`` when absent (Kafka 4.0-4.2)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[AssignedTopicPartitions, ...]
    partitions_pending_revocation: tuple[AssignedTopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
CONSUMER_KEY_TYPES = (
    ConsumerGroupMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)


# --------------------------------------------------------------------------- writer


class _W:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, fmt: str, v: int) -> _W:
        self.parts.append(struct.pack(fmt, v))
        return self

    def uvarint(self, v: int) -> _W:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))
        return self

    def key_string(self, s: str) -> _W:
        raw = s.encode()
        self.raw(">h", len(raw))
        self.parts.append(raw)
        return self

    def string(self, s: str | None) -> _W:
        if s is None:
            return self.uvarint(0)
        raw = s.encode()
        self.uvarint(len(raw) + 1)
        self.parts.append(raw)
        return self

    def compact_bytes(self, b: bytes) -> _W:
        self.uvarint(len(b) + 1)
        self.parts.append(b)
        return self

    def strings(self, items: tuple[str, ...]) -> _W:
        self.uvarint(len(items) + 1)
        for s in items:
            self.string(s)
        return self

    def int32s(self, items: tuple[int, ...]) -> _W:
        self.uvarint(len(items) + 1)
        for v in items:
            self.raw(">i", v)
        return self

    def topic_partitions(
        self, items: tuple[TopicPartitions, ...] | tuple[AssignedTopicPartitions, ...]
    ) -> _W:
        self.uvarint(len(items) + 1)
        for tp in items:
            self.parts.append(tp.topic_id.bytes)
            self.int32s(tp.partitions)
            epochs = tp.assignment_epochs if isinstance(tp, AssignedTopicPartitions) else None
            self.tags(None if epochs is None else {0: _W().int32s(epochs).done()})
        return self

    def tags(self, tagged: dict[int, bytes] | None = None) -> _W:
        tagged = tagged or {}
        self.uvarint(len(tagged))
        for tag in sorted(tagged):
            self.uvarint(tag).uvarint(len(tagged[tag]))
            self.parts.append(tagged[tag])
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


# --------------------------------------------------------------------------- reader


class _R:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerRecordDecodeError("truncated record")
        chunk = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return chunk

    def raw(self, fmt: str) -> int:
        return int(struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ConsumerRecordDecodeError("varint too long")

    def key_string(self) -> str:
        n = self.raw(">h")
        if n < 0:
            raise ConsumerRecordDecodeError("null key string")
        return self.take(n).decode()

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode()

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ConsumerRecordDecodeError("null in a non-nullable string")
        return s

    def count(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise ConsumerRecordDecodeError("null array")
        return n

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.count()))

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise ConsumerRecordDecodeError("null in non-nullable bytes")
        return self.take(n)

    def done(self) -> bool:
        return self.pos == len(self.data)

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.raw(">i") for _ in range(self.count()))

    def nullable_int32s(self) -> tuple[int, ...] | None:
        n = self.uvarint() - 1
        return None if n < 0 else tuple(self.raw(">i") for _ in range(n))

    def topic_partitions(self) -> tuple[TopicPartitions, ...]:
        return tuple(TopicPartitions(tp.topic_id, tp.partitions)
                     for tp in self.assigned_topic_partitions())

    def assigned_topic_partitions(self) -> tuple[AssignedTopicPartitions, ...]:
        out = []
        for _ in range(self.count()):
            topic_id = uuid.UUID(bytes=self.take(16))
            partitions = self.int32s()
            raw_epochs = self.tags().get(0)
            epochs = None if raw_epochs is None else _R(raw_epochs).nullable_int32s()
            out.append(AssignedTopicPartitions(topic_id, partitions, epochs))
        return tuple(out)

    def tags(self) -> dict[int, bytes]:
        tagged = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            tagged[tag] = self.take(self.uvarint())
        return tagged


# --------------------------------------------------------------------------- serde


def serialize_key(key: ConsumerRecordKey) -> bytes:
    w = _W()
    match key:
        case ConsumerGroupMetadataKey():
            return w.raw(">h", METADATA_KEY).key_string(key.group).done()
        case ConsumerGroupMemberMetadataKey():
            w.raw(">h", MEMBER_METADATA_KEY)
        case ConsumerGroupTargetAssignmentMetadataKey():
            return w.raw(">h", TARGET_METADATA_KEY).key_string(key.group).done()
        case ConsumerGroupTargetAssignmentMemberKey():
            w.raw(">h", TARGET_MEMBER_KEY)
        case ConsumerGroupCurrentMemberAssignmentKey():
            w.raw(">h", CURRENT_ASSIGNMENT_KEY)
        case ConsumerGroupRegularExpressionKey():
            return w.raw(">h", REGEX_KEY).key_string(key.group).key_string(key.regex).done()
    return w.key_string(key.group).key_string(key.member_id).done()


def serialize_value(value: ConsumerRecordValue) -> bytes:
    w = _W().raw(">h", 0)
    match value:
        case ConsumerGroupMetadataValue():
            w.raw(">i", value.epoch)
            tagged = {0: struct.pack(">q", value.metadata_hash)} if value.metadata_hash else {}
            return w.tags(tagged).done()
        case ConsumerGroupMemberMetadataValue():
            w.string(value.instance_id).string(value.rack_id)
            w.string(value.client_id).string(value.client_host)
            w.strings(value.subscribed_topic_names).string(value.subscribed_topic_regex)
            w.raw(">i", value.rebalance_timeout_ms).string(value.server_assignor)
            classic = value.classic_member_metadata
            if classic is not None:
                return w.tags({0: _classic_bytes(classic)}).done()
        case ConsumerGroupTargetAssignmentMetadataValue():
            w.raw(">i", value.assignment_epoch)
            stamp = value.assignment_timestamp
            return w.tags({0: struct.pack(">q", stamp)} if stamp else {}).done()
        case ConsumerGroupTargetAssignmentMemberValue():
            w.topic_partitions(value.topic_partitions)
        case ConsumerGroupCurrentMemberAssignmentValue():
            w.raw(">i", value.member_epoch).raw(">i", value.previous_member_epoch)
            w.raw(">b", value.state)
            w.topic_partitions(value.assigned_partitions)
            w.topic_partitions(value.partitions_pending_revocation)
        case ConsumerGroupRegularExpressionValue():
            w.strings(value.topics).raw(">q", value.version).raw(">q", value.timestamp)
    return w.tags().done()


def _classic_bytes(classic: ClassicMemberMetadata) -> bytes:
    """A tagged nullable struct: the presence marker (varint 1), then the struct."""
    w = _W().uvarint(1).raw(">i", classic.session_timeout_ms)
    w.uvarint(len(classic.supported_protocols) + 1)
    for name, metadata in classic.supported_protocols:
        w.string(name).compact_bytes(metadata).uvarint(0)
    return w.tags().done()


def _read_classic(data: bytes) -> ClassicMemberMetadata | None:
    r = _R(data)
    if r.uvarint() == 0:
        return None
    session_timeout_ms = r.raw(">i")
    protocols = []
    for _ in range(r.count()):
        name = r.string()
        protocols.append((name, r.compact_bytes()))
        r.tags()
    r.tags()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def serialize(
    key: ConsumerRecordKey, value: ConsumerRecordValue | None
) -> tuple[bytes, bytes | None]:
    return serialize_key(key), None if value is None else serialize_value(value)


def deserialize_key(data: bytes) -> ConsumerRecordKey | None:
    """The typed key; ``None`` for a record type read and ignored (4) or not ours."""
    r = _R(data)
    version = r.raw(">h")
    if version == METADATA_KEY:
        return ConsumerGroupMetadataKey(r.key_string())
    if version == TARGET_METADATA_KEY:
        return ConsumerGroupTargetAssignmentMetadataKey(r.key_string())
    if version == REGEX_KEY:
        return ConsumerGroupRegularExpressionKey(r.key_string(), r.key_string())
    if version == MEMBER_METADATA_KEY:
        return ConsumerGroupMemberMetadataKey(r.key_string(), r.key_string())
    if version == TARGET_MEMBER_KEY:
        return ConsumerGroupTargetAssignmentMemberKey(r.key_string(), r.key_string())
    if version == CURRENT_ASSIGNMENT_KEY:
        return ConsumerGroupCurrentMemberAssignmentKey(r.key_string(), r.key_string())
    return None


def deserialize_value(key: ConsumerRecordKey, data: bytes) -> ConsumerRecordValue:
    r = _R(data)
    version = r.raw(">h")
    if version != 0:
        raise ConsumerRecordDecodeError(f"unknown value version {version} for {key!r}")
    value: ConsumerRecordValue
    match key:
        case ConsumerGroupMetadataKey():
            epoch = r.raw(">i")
            tagged = r.tags()
            raw_hash = tagged.get(0)
            metadata_hash = struct.unpack(">q", raw_hash)[0] if raw_hash else 0
            return ConsumerGroupMetadataValue(epoch, int(metadata_hash))
        case ConsumerGroupMemberMetadataKey():
            value = ConsumerGroupMemberMetadataValue(
                instance_id=r.nullable_string(),
                rack_id=r.nullable_string(),
                client_id=r.string(),
                client_host=r.string(),
                subscribed_topic_names=r.strings(),
                subscribed_topic_regex=r.nullable_string(),
                rebalance_timeout_ms=r.raw(">i"),
                server_assignor=r.nullable_string(),
            )
            raw_classic = r.tags().get(0)
            if raw_classic is not None:
                value = replace(value, classic_member_metadata=_read_classic(raw_classic))
            return value
        case ConsumerGroupTargetAssignmentMetadataKey():
            epoch = r.raw(">i")
            raw_stamp = r.tags().get(0)
            stamp = struct.unpack(">q", raw_stamp)[0] if raw_stamp else 0
            return ConsumerGroupTargetAssignmentMetadataValue(epoch, int(stamp))
        case ConsumerGroupTargetAssignmentMemberKey():
            value = ConsumerGroupTargetAssignmentMemberValue(r.topic_partitions())
        case ConsumerGroupCurrentMemberAssignmentKey():
            value = ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=r.raw(">i"),
                previous_member_epoch=r.raw(">i"),
                state=r.raw(">b"),
                assigned_partitions=r.assigned_topic_partitions(),
                partitions_pending_revocation=r.assigned_topic_partitions(),
            )
        case ConsumerGroupRegularExpressionKey():
            value = ConsumerGroupRegularExpressionValue(r.strings(), r.raw(">q"), r.raw(">q"))
    r.tags()
    return value


def deserialize(
    key: bytes, value: bytes | None
) -> tuple[ConsumerRecordKey, ConsumerRecordValue | None] | None:
    typed = deserialize_key(key)
    if typed is None:
        return None
    return typed, None if value is None else deserialize_value(typed, value)
