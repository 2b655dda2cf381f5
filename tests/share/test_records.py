"""``__share_group_state`` records (Kafka's share coordinator formats): snapshots round
trip, an update applies over the snapshot before it, a tombstone deletes, other record
types are skipped."""

from __future__ import annotations

import uuid

from samsa.coordinator.codec import Writer
from samsa.share import DurableState, RecordState, StateBatch
from samsa.share.records import (
    UPDATE_KEY,
    ShareSnapshot,
    ShareStateKey,
    decode_key,
    decode_snapshot,
    encode_key,
    encode_snapshot,
    replay,
)

KEY = ShareStateKey("g", uuid.UUID(int=7), 3)
ACK, ARCH, AV = RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.AVAILABLE


def test_snapshot_round_trip() -> None:
    snap = ShareSnapshot(1, 40, (StateBatch(40, 41, AV, 2), StateBatch(43, 43, ACK, 1)),
                         snapshot_epoch=3, leader_epoch=5, create_timestamp=7,
                         write_timestamp=9)
    assert decode_key(encode_key(KEY)) == (0, KEY)
    assert decode_snapshot(encode_snapshot(snap)) == snap
    assert snap.durable() == DurableState(40, {40: (AV, 2), 41: (AV, 2), 43: (ACK, 1)})
    assert KEY.coordinator_key() == f"g:{KEY.topic_id}:3"


def _update(start: int, batches: list[tuple[int, int, int, int]]) -> bytes:
    w = Writer(flexible=True).int16(0).int32(0).int32(0).int64(start)
    w.array_len(len(batches))
    for first, last, state, count in batches:
        w.int64(first).int64(last).int8(state).int16(count).tags()
    return w.tags().done()


def test_replay_applies_updates_over_snapshots_and_tombstones() -> None:
    states: dict[ShareStateKey, DurableState] = {}
    snap = ShareSnapshot(0, 10, (StateBatch(10, 12, AV, 1),))
    replay(states, encode_key(KEY), encode_snapshot(snap))
    replay(states, encode_key(KEY, UPDATE_KEY), _update(11, [(11, 11, 4, 2)]))
    assert states[KEY] == DurableState(11, {11: (ARCH, 2), 12: (AV, 1)})
    replay(states, b"\x00\x07" + encode_key(KEY)[2:], b"whatever")  # not a state record
    replay(states, encode_key(KEY), None)
    assert states == {}
