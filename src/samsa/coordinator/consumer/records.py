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

from samsa.coordinator.codec import Reader, Writer
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


# --------------------------------------------------------------------------- codec


def _writer() -> Writer:
    return Writer(flexible=True)


def _reader(data: bytes) -> Reader:
    return Reader(data, ConsumerRecordDecodeError, flexible=True)


def write_topic_partitions(
    w: Writer, items: tuple[TopicPartitions, ...] | tuple[AssignedTopicPartitions, ...]
) -> None:
    w.array_len(len(items))
    for tp in items:
        w.uuid(tp.topic_id).int32s(tp.partitions)
        epochs = tp.assignment_epochs if isinstance(tp, AssignedTopicPartitions) else None
        w.tags(None if epochs is None else {0: _writer().int32s(epochs).done()})


def _read_assigned_topic_partitions(r: Reader) -> tuple[AssignedTopicPartitions, ...]:
    out = []
    for _ in range(r.array_len()):
        topic_id = r.uuid()
        partitions = r.int32s()
        raw_epochs = r.tags().get(0)
        epochs = None if raw_epochs is None else _reader(raw_epochs).nullable_int32s()
        out.append(AssignedTopicPartitions(topic_id, partitions, epochs))
    return tuple(out)


def read_topic_partitions(r: Reader) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(tp.topic_id, tp.partitions)
                 for tp in _read_assigned_topic_partitions(r))


# --------------------------------------------------------------------------- serde


def serialize_key(key: ConsumerRecordKey) -> bytes:
    w = Writer()
    match key:
        case ConsumerGroupMetadataKey():
            return w.int16(METADATA_KEY).string(key.group).done()
        case ConsumerGroupMemberMetadataKey():
            w.int16(MEMBER_METADATA_KEY)
        case ConsumerGroupTargetAssignmentMetadataKey():
            return w.int16(TARGET_METADATA_KEY).string(key.group).done()
        case ConsumerGroupTargetAssignmentMemberKey():
            w.int16(TARGET_MEMBER_KEY)
        case ConsumerGroupCurrentMemberAssignmentKey():
            w.int16(CURRENT_ASSIGNMENT_KEY)
        case ConsumerGroupRegularExpressionKey():
            return w.int16(REGEX_KEY).string(key.group).string(key.regex).done()
    return w.string(key.group).string(key.member_id).done()


def serialize_value(value: ConsumerRecordValue) -> bytes:
    w = _writer().int16(0)
    match value:
        case ConsumerGroupMetadataValue():
            w.int32(value.epoch)
            tagged = {0: struct.pack(">q", value.metadata_hash)} if value.metadata_hash else {}
            return w.tags(tagged).done()
        case ConsumerGroupMemberMetadataValue():
            w.string(value.instance_id).string(value.rack_id)
            w.string(value.client_id).string(value.client_host)
            w.strings(value.subscribed_topic_names).string(value.subscribed_topic_regex)
            w.int32(value.rebalance_timeout_ms).string(value.server_assignor)
            classic = value.classic_member_metadata
            if classic is not None:
                return w.tags({0: _classic_bytes(classic)}).done()
        case ConsumerGroupTargetAssignmentMetadataValue():
            w.int32(value.assignment_epoch)
            stamp = value.assignment_timestamp
            return w.tags({0: struct.pack(">q", stamp)} if stamp else {}).done()
        case ConsumerGroupTargetAssignmentMemberValue():
            write_topic_partitions(w, value.topic_partitions)
        case ConsumerGroupCurrentMemberAssignmentValue():
            w.int32(value.member_epoch).int32(value.previous_member_epoch).int8(value.state)
            write_topic_partitions(w, value.assigned_partitions)
            write_topic_partitions(w, value.partitions_pending_revocation)
        case ConsumerGroupRegularExpressionValue():
            w.strings(value.topics).int64(value.version).int64(value.timestamp)
    return w.tags().done()


def _classic_bytes(classic: ClassicMemberMetadata) -> bytes:
    """A tagged nullable struct: the presence marker (varint 1), then the struct."""
    w = _writer().uvarint(1).int32(classic.session_timeout_ms)
    w.array_len(len(classic.supported_protocols))
    for name, metadata in classic.supported_protocols:
        w.string(name).bytes_(metadata).tags()
    return w.tags().done()


def _read_classic(data: bytes) -> ClassicMemberMetadata | None:
    r = _reader(data)
    if r.uvarint() == 0:
        return None
    session_timeout_ms = r.int32()
    protocols = []
    for _ in range(r.array_len()):
        name = r.string()
        protocols.append((name, r.bytes_()))
        r.tags()
    r.tags()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def serialize(
    key: ConsumerRecordKey, value: ConsumerRecordValue | None
) -> tuple[bytes, bytes | None]:
    return serialize_key(key), None if value is None else serialize_value(value)


def deserialize_key(data: bytes) -> ConsumerRecordKey | None:
    """The typed key; ``None`` for a record type read and ignored (4) or not ours."""
    r = Reader(data, ConsumerRecordDecodeError)
    version = r.int16()
    if version == METADATA_KEY:
        return ConsumerGroupMetadataKey(r.string())
    if version == TARGET_METADATA_KEY:
        return ConsumerGroupTargetAssignmentMetadataKey(r.string())
    if version == REGEX_KEY:
        return ConsumerGroupRegularExpressionKey(r.string(), r.string())
    if version == MEMBER_METADATA_KEY:
        return ConsumerGroupMemberMetadataKey(r.string(), r.string())
    if version == TARGET_MEMBER_KEY:
        return ConsumerGroupTargetAssignmentMemberKey(r.string(), r.string())
    if version == CURRENT_ASSIGNMENT_KEY:
        return ConsumerGroupCurrentMemberAssignmentKey(r.string(), r.string())
    return None


def deserialize_value(key: ConsumerRecordKey, data: bytes) -> ConsumerRecordValue:
    r = _reader(data)
    version = r.int16()
    if version != 0:
        raise ConsumerRecordDecodeError(f"unknown value version {version} for {key!r}")
    value: ConsumerRecordValue
    match key:
        case ConsumerGroupMetadataKey():
            epoch = r.int32()
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
                rebalance_timeout_ms=r.int32(),
                server_assignor=r.nullable_string(),
            )
            raw_classic = r.tags().get(0)
            if raw_classic is not None:
                value = replace(value, classic_member_metadata=_read_classic(raw_classic))
            return value
        case ConsumerGroupTargetAssignmentMetadataKey():
            epoch = r.int32()
            raw_stamp = r.tags().get(0)
            stamp = struct.unpack(">q", raw_stamp)[0] if raw_stamp else 0
            return ConsumerGroupTargetAssignmentMetadataValue(epoch, int(stamp))
        case ConsumerGroupTargetAssignmentMemberKey():
            value = ConsumerGroupTargetAssignmentMemberValue(read_topic_partitions(r))
        case ConsumerGroupCurrentMemberAssignmentKey():
            value = ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=r.int32(),
                previous_member_epoch=r.int32(),
                state=r.int8(),
                assigned_partitions=_read_assigned_topic_partitions(r),
                partitions_pending_revocation=_read_assigned_topic_partitions(r),
            )
        case ConsumerGroupRegularExpressionKey():
            value = ConsumerGroupRegularExpressionValue(r.strings(), r.int64(), r.int64())
    r.tags()
    return value


def deserialize(
    key: bytes, value: bytes | None
) -> tuple[ConsumerRecordKey, ConsumerRecordValue | None] | None:
    typed = deserialize_key(key)
    if typed is None:
        return None
    return typed, None if value is None else deserialize_value(typed, value)
