"""Share-group (KIP-932) records of ``__consumer_offsets``, typed, with Kafka 4.x codecs.

Keys are non-flexible (an int16 naming the record type, then int16-length strings); values
are version 0 of flexible schemas, as Kafka's ``group-coordinator`` message JSON files
define them (the byte-level helpers are the consumer-group codec's):

==  ==========================================  =========================================
10  ShareGroupMemberMetadata {group, member}    {rack, client id, client host, topics}
11  ShareGroupMetadata {group}                  {epoch, metadata hash}
12  ShareGroupTargetAssignmentMetadata {group}  {assignment epoch}
13  ShareGroupTargetAssignmentMember {g, m}     {[topic id, partitions]}
14  ShareGroupCurrentMemberAssignment {g, m}    {epoch, previous epoch, state, assigned}
15  ShareGroupStatePartitionMetadata {group}    (read and ignored: samsa keeps share
                                                 partition state on the partition leader)
==  ==========================================  =========================================

A ``None`` value is a tombstone. Unknown tagged fields are skipped on read.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.coordinator.codec import Reader, Writer
from samsa.coordinator.consumer.records import (
    ConsumerRecordDecodeError,
    read_topic_partitions,
    write_topic_partitions,
)
from samsa.coordinator.events import TopicPartitions

MEMBER_METADATA_KEY = 10
METADATA_KEY = 11
TARGET_METADATA_KEY = 12
TARGET_MEMBER_KEY = 13
CURRENT_ASSIGNMENT_KEY = 14
STATE_PARTITION_METADATA_KEY = 15


@dataclass(frozen=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True)
class ShareGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]


ShareRecordKey = (
    ShareGroupMetadataKey
    | ShareGroupMemberMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
)
ShareRecordValue = (
    ShareGroupMetadataValue
    | ShareGroupMemberMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
)
SHARE_KEY_TYPES = (
    ShareGroupMetadataKey,
    ShareGroupMemberMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
)
_GROUP_KEYS: dict[int, type[ShareGroupMetadataKey | ShareGroupTargetAssignmentMetadataKey]] = {
    METADATA_KEY: ShareGroupMetadataKey,
               TARGET_METADATA_KEY: ShareGroupTargetAssignmentMetadataKey}
_MEMBER_KEYS: dict[int, type[ShareGroupMemberMetadataKey | ShareGroupTargetAssignmentMemberKey
                            | ShareGroupCurrentMemberAssignmentKey]] = {
    MEMBER_METADATA_KEY: ShareGroupMemberMetadataKey,
                TARGET_MEMBER_KEY: ShareGroupTargetAssignmentMemberKey,
                CURRENT_ASSIGNMENT_KEY: ShareGroupCurrentMemberAssignmentKey}
_KEY_IDS = {cls: kid for kid, cls in (*_GROUP_KEYS.items(), *_MEMBER_KEYS.items())}


def serialize_key(key: ShareRecordKey) -> bytes:
    w = Writer().int16(_KEY_IDS[type(key)]).string(key.group)
    if isinstance(key, ShareGroupMetadataKey | ShareGroupTargetAssignmentMetadataKey):
        return w.done()
    return w.string(key.member_id).done()


def serialize_value(value: ShareRecordValue) -> bytes:
    w = Writer(flexible=True).int16(0)
    match value:
        case ShareGroupMetadataValue():
            w.int32(value.epoch).int64(value.metadata_hash)
        case ShareGroupMemberMetadataValue():
            w.string(value.rack_id).string(value.client_id).string(value.client_host)
            w.strings(value.subscribed_topic_names)
        case ShareGroupTargetAssignmentMetadataValue():
            w.int32(value.assignment_epoch)
        case ShareGroupTargetAssignmentMemberValue():
            write_topic_partitions(w, value.topic_partitions)
        case ShareGroupCurrentMemberAssignmentValue():
            w.int32(value.member_epoch).int32(value.previous_member_epoch)
            w.int8(value.state)
            write_topic_partitions(w, value.assigned_partitions)
    return w.tags().done()


def serialize(key: ShareRecordKey,
              value: ShareRecordValue | None) -> tuple[bytes, bytes | None]:
    return serialize_key(key), None if value is None else serialize_value(value)


def is_share_key(data: bytes) -> bool:
    """Whether the raw key names a share-group record type (10-15)."""
    return len(data) >= 2 and int.from_bytes(data[:2], "big", signed=True) in range(10, 16)


def deserialize_key(data: bytes) -> ShareRecordKey | None:
    """The typed key; ``None`` for a type read and ignored (15) or not a share record."""
    r = Reader(data, ConsumerRecordDecodeError)
    version = r.int16()
    if version in _GROUP_KEYS:
        return _GROUP_KEYS[version](r.string())
    if version in _MEMBER_KEYS:
        return _MEMBER_KEYS[version](r.string(), r.string())
    return None


def deserialize_value(key: ShareRecordKey, data: bytes) -> ShareRecordValue:
    r = Reader(data, ConsumerRecordDecodeError, flexible=True)
    version = r.int16()
    if version != 0:
        raise ConsumerRecordDecodeError(f"unknown value version {version} for {key!r}")
    value: ShareRecordValue
    match key:
        case ShareGroupMetadataKey():
            value = ShareGroupMetadataValue(r.int32(), r.int64())
        case ShareGroupMemberMetadataKey():
            value = ShareGroupMemberMetadataValue(r.nullable_string(), r.string(), r.string(),
                                                  r.strings())
        case ShareGroupTargetAssignmentMetadataKey():
            value = ShareGroupTargetAssignmentMetadataValue(r.int32())
        case ShareGroupTargetAssignmentMemberKey():
            value = ShareGroupTargetAssignmentMemberValue(read_topic_partitions(r))
        case ShareGroupCurrentMemberAssignmentKey():
            value = ShareGroupCurrentMemberAssignmentValue(
                r.int32(), r.int32(), r.int8(), read_topic_partitions(r))
    r.tags()
    return value


def deserialize(key: bytes, value: bytes | None
                ) -> tuple[ShareRecordKey, ShareRecordValue | None] | None:
    typed = deserialize_key(key)
    if typed is None:
        return None
    return typed, None if value is None else deserialize_value(typed, value)
