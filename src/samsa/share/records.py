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

from samsa.coordinator.consumer.records import _R, _W
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


def encode_key(key: ShareStateKey, kind: int = SNAPSHOT_KEY) -> bytes:
    w = _W().raw(">h", kind).key_string(key.group_id)
    w.parts.append(key.topic_id.bytes)
    return w.raw(">i", key.partition).done()


def encode_snapshot(value: ShareSnapshot) -> bytes:
    w = _W().raw(">h", 0).raw(">i", value.snapshot_epoch).raw(">i", value.state_epoch)
    w.raw(">i", value.leader_epoch).raw(">q", value.start_offset)
    w.raw(">q", value.create_timestamp).raw(">q", value.write_timestamp)
    w.uvarint(len(value.batches) + 1)
    for b in value.batches:
        w.raw(">q", b.first_offset).raw(">q", b.last_offset).raw(">b", int(b.state))
        w.raw(">h", b.delivery_count).tags()
    return w.tags().done()


def decode_key(data: bytes) -> tuple[int, ShareStateKey] | None:
    """(record type, key); None for a type this reader does not know."""
    r = _R(data)
    kind = r.raw(">h")
    if kind not in (SNAPSHOT_KEY, UPDATE_KEY):
        return None
    group = r.key_string()
    topic_id = uuid.UUID(bytes=r.take(16))
    return kind, ShareStateKey(group, topic_id, r.raw(">i"))


def _batches(r: _R) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.count()):
        first, last = r.raw(">q"), r.raw(">q")
        state, count = RecordState(r.raw(">b")), r.raw(">h")
        r.tags()
        out.append(StateBatch(first, last, state, count))
    return tuple(out)


def decode_snapshot(data: bytes) -> ShareSnapshot:
    r = _R(data)
    r.raw(">h")  # value version
    snapshot_epoch, state_epoch, leader_epoch = r.raw(">i"), r.raw(">i"), r.raw(">i")
    start = r.raw(">q")
    created, written = r.raw(">q"), r.raw(">q")
    batches = _batches(r)
    r.tags()
    return ShareSnapshot(state_epoch, start, batches, snapshot_epoch, leader_epoch, created,
                         written)


def decode_update(data: bytes) -> ShareUpdate:
    """A ShareUpdate value: snapshot epoch, leader epoch, start offset (-1: unchanged),
    state batches."""
    r = _R(data)
    r.raw(">h")
    r.raw(">i")
    r.raw(">i")
    start = r.raw(">q")
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
