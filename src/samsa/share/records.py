"""Share-partition state records of ``__share_group_state`` (Kafka's share coordinator
formats), typed, with their codecs.

Key (non-flexible): int16 record type (0 ShareSnapshot, 1 ShareUpdate), group id (int16
length string), topic id (16 bytes), partition (int32). ShareSnapshot value, version 0,
flexible: snapshot epoch, state epoch, leader epoch (int32 each), start offset,
create timestamp, write timestamp (int64 each), state batches (compact array of first
offset, last offset int64, delivery state int8, delivery count int16), tagged fields.

samsa writes snapshots only, one per change: the latest one holds the partition's whole
durable state, so compaction may keep just it. ShareUpdate records (Kafka's deltas between
snapshots) are read (applied over the snapshot before them) but not written.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from samsa.coordinator.codec import Reader, Writer
from samsa.share.partition import DurableState, RecordState, ShareUpdate, StateBatch

SNAPSHOT_KEY = 0
UPDATE_KEY = 1


@dataclass(frozen=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey`` text, hashed to pick a state partition."""
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass(frozen=True)
class ShareSnapshot:
    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    snapshot_epoch: int = 0
    leader_epoch: int = 0
    create_timestamp: int = 0
    write_timestamp: int = 0

    def durable(self) -> DurableState:
        state = DurableState(self.start_offset)
        state.apply(ShareUpdate(self.start_offset, self.batches))
        return state


class ShareStateDecodeError(ValueError):
    """The bytes are not a valid ``__share_group_state`` record."""


def encode_key(key: ShareStateKey, kind: int = SNAPSHOT_KEY) -> bytes:
    return (Writer().int16(kind).string(key.group_id).uuid(key.topic_id)
            .int32(key.partition).done())


def encode_snapshot(value: ShareSnapshot) -> bytes:
    w = Writer(flexible=True).int16(0).int32(value.snapshot_epoch).int32(value.state_epoch)
    w.int32(value.leader_epoch).int64(value.start_offset)
    w.int64(value.create_timestamp).int64(value.write_timestamp)
    w.array_len(len(value.batches))
    for b in value.batches:
        w.int64(b.first_offset).int64(b.last_offset).int8(int(b.state))
        w.int16(b.delivery_count).tags()
    return w.tags().done()


def decode_key(data: bytes) -> tuple[int, ShareStateKey] | None:
    """(record type, key); None for a type this reader does not know."""
    r = Reader(data, ShareStateDecodeError)
    kind = r.int16()
    if kind not in (SNAPSHOT_KEY, UPDATE_KEY):
        return None
    group = r.string()
    topic_id = r.uuid()
    return kind, ShareStateKey(group, topic_id, r.int32())


def _reader(data: bytes) -> Reader:
    return Reader(data, ShareStateDecodeError, flexible=True)


def _batches(r: Reader) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.array_len()):
        first, last = r.int64(), r.int64()
        state, count = RecordState(r.int8()), r.int16()
        r.tags()
        out.append(StateBatch(first, last, state, count))
    return tuple(out)


def decode_snapshot(data: bytes) -> ShareSnapshot:
    r = _reader(data)
    r.int16()  # value version
    snapshot_epoch, state_epoch, leader_epoch = r.int32(), r.int32(), r.int32()
    start = r.int64()
    created, written = r.int64(), r.int64()
    batches = _batches(r)
    r.tags()
    return ShareSnapshot(state_epoch, start, batches, snapshot_epoch, leader_epoch, created,
                         written)


def decode_update(data: bytes) -> ShareUpdate:
    """A ShareUpdate value: snapshot epoch, leader epoch, start offset (-1: unchanged),
    state batches."""
    r = _reader(data)
    r.int16()
    r.int32()
    r.int32()
    start = r.int64()
    batches = _batches(r)
    r.tags()
    return ShareUpdate(start, batches)


def replay(states: dict[ShareStateKey, DurableState], key: bytes,
           value: bytes | None) -> None:
    """Apply one ``__share_group_state`` record to ``states`` (a tombstone deletes)."""
    decoded = decode_key(key)
    if decoded is None:
        return
    kind, typed = decoded
    if value is None:
        states.pop(typed, None)
    elif kind == SNAPSHOT_KEY:
        states[typed] = decode_snapshot(value).durable()
    else:
        update = decode_update(value)
        state = states.setdefault(typed, DurableState(max(update.start_offset, 0)))
        state.apply(update)


__all__ = ["ShareSnapshot", "ShareStateKey", "decode_key", "decode_snapshot",
           "encode_key", "encode_snapshot", "replay"]
