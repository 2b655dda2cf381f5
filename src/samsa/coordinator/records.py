"""The records Kafka writes to ``__consumer_offsets``: typed values and their binary codecs.

The coordinator writes and replays records as typed values (a key dataclass and a value
dataclass, ``None`` for a tombstone); only the runtime turns them into bytes
(:func:`serialize`) when it appends and back (:func:`deserialize`) when it loads a shard,
like Kafka's ``GroupCoordinatorRecordSerde``. On the wire a key starts with an int16 version
that names the record type:

* versions 0 and 1: offset commit key ``{group string, topic string, partition int32}``;
* version 2: group metadata key ``{group string}``;
* 3, 5-8, 16: consumer-group (KIP-848) records, typed in :mod:`.consumer.records`;
* 10-14: share-group (KIP-932) records, typed in :mod:`.share.records` (15 is read and
  skipped);
* 0x7A5A: samsa's group history (:mod:`.history.codec`), a type Kafka's tools skip;
* anything else: records of other coordinators (streams groups), which callers skip.

Values written here are offset commit value v3 (v1 when an explicit retention time gives an
expire timestamp, as Kafka does) and group metadata value v3. Decoding accepts every version
Kafka has written (0-4; v4 is the flexible encoding), with the one writer and reader of
:mod:`.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.coordinator.codec import Reader, Writer
from samsa.coordinator.consumer import records as consumer_records
from samsa.coordinator.consumer.records import (
    CONSUMER_KEY_TYPES,
    ConsumerRecordKey,
    ConsumerRecordValue,
)
from samsa.coordinator.history import codec as history_codec
from samsa.coordinator.history.model import HistoryEvent, HistoryKey
from samsa.coordinator.share import records as share_records
from samsa.coordinator.share.records import ShareRecordValue

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


class RecordDecodeError(ValueError):
    """The bytes are not a valid record of the expected type."""


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


RecordKey = (OffsetCommitKey | GroupMetadataKey | ConsumerRecordKey | HistoryKey
             | share_records.ShareRecordKey)
RecordValue = (OffsetCommitValue | GroupMetadataValue | ConsumerRecordValue | HistoryEvent
               | share_records.ShareRecordValue)


# --------------------------------------------------------------------------- serde


def serialize(key: RecordKey, value: RecordValue | None) -> tuple[bytes, bytes | None]:
    """Key and value bytes of one record, in Kafka's formats."""
    if isinstance(key, CONSUMER_KEY_TYPES):
        assert not isinstance(value, OffsetCommitValue | GroupMetadataValue | HistoryEvent
                                  | ShareRecordValue)
        return consumer_records.serialize(key, value)
    if isinstance(key, share_records.SHARE_KEY_TYPES):
        return share_records.serialize(key, value)  # type: ignore[arg-type]
    if isinstance(key, HistoryKey):
        assert value is None or isinstance(value, HistoryEvent)
        return (history_codec.encode_key(key),
                None if value is None else history_codec.encode_value(value))
    if isinstance(key, OffsetCommitKey):
        assert value is None or isinstance(value, OffsetCommitValue)
        raw_key = encode_offset_commit_key(key.group, key.topic, key.partition)
        return raw_key, None if value is None else encode_offset_commit_value(value)
    assert value is None or isinstance(value, GroupMetadataValue)
    raw_key = encode_group_metadata_key(key.group)
    return raw_key, None if value is None else encode_group_metadata_value(value)


def deserialize(key: bytes, value: bytes | None) -> tuple[RecordKey, RecordValue | None] | None:
    """The typed record of a log entry; ``None`` for record types this coordinator does not
    own (streams groups, Kafka < 4.1 partition metadata, share-group state partition
    metadata), which loading skips."""
    if share_records.is_share_key(key):
        return share_records.deserialize(key, value)
    decoded = decode_key(key)
    if decoded is None:
        history = history_codec.decode_key(key)
        if history is not None:
            return history, None if value is None else history_codec.decode_value(value)
        return consumer_records.deserialize(key, value)
    if value is None:
        return decoded, None
    if isinstance(decoded, OffsetCommitKey):
        return decoded, decode_offset_commit_value(value)
    return decoded, decode_group_metadata_value(value)


# --------------------------------------------------------------------------- keys


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return (
        Writer()
        .int16(OFFSET_COMMIT_KEY_VERSION)
        .string(group)
        .string(topic)
        .int32(partition)
        .done()
    )


def encode_group_metadata_key(group: str) -> bytes:
    return Writer().int16(GROUP_METADATA_KEY_VERSION).string(group).done()


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """Decode a record key; ``None`` for record types this coordinator does not own."""
    r = Reader(key, RecordDecodeError)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string())
    return None


# --------------------------------------------------------------------------- offset values


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Value v3, or v1 when ``expire_timestamp`` is set (as Kafka does)."""
    w = Writer()
    if value.expire_timestamp >= 0:
        return (
            w.int16(1)
            .int64(value.offset)
            .string(value.metadata)
            .int64(value.commit_timestamp)
            .int64(value.expire_timestamp)
            .done()
        )
    return (
        w.int16(OFFSET_COMMIT_VALUE_VERSION)
        .int64(value.offset)
        .int32(value.leader_epoch)
        .string(value.metadata)
        .int64(value.commit_timestamp)
        .done()
    )


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = Reader(data, RecordDecodeError)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordDecodeError(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.tagged_fields()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# --------------------------------------------------------------------------- group values


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Group metadata value v3."""
    w = Writer().int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type).int32(value.generation)
    w.string(value.protocol).string(value.leader).int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).int32(m.rebalance_timeout).int32(m.session_timeout)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return w.done()


def _decode_member(r: Reader, version: int) -> MemberMetadataValue:
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.int32() if version >= 1 else -1
    session_timeout = r.int32()
    if version == 0:
        rebalance_timeout = session_timeout
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.tagged_fields()
    return MemberMetadataValue(
        member_id,
        instance_id,
        client_id,
        client_host,
        rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
    )


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = Reader(data, RecordDecodeError)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordDecodeError(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.int64() if version >= 2 else -1
    members = tuple(_decode_member(r, version) for _ in range(r.array_len()))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, members)
