"""Transactional offset commits in the group coordinator (KIP-98, KIP-447), on the fake
clock: staged per producer, applied by a commit marker, dropped by an abort, fenced by the
group (generation, member, instance id; a consumer group's member epoch) and by the
producer epoch, written as transactional records and rebuilt by a reload (the harness
replays every record and marker after each test)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E

from samsa.coordinator import CoordinatorShard, FetchGroup, OffsetFetch, txn_offsets
from samsa.coordinator.events import CommitPartition, CommitTopic, TxnOffsetCommit
from samsa.coordinator.records import OffsetCommitKey
from samsa.coordinator.responses import OffsetCommitResponse, OffsetFetchResponse

from .consumer_ctx import T1, CCtx
from .harness import Ctx, TxnMarker

PID = 7


def txn_commit(ctx: Ctx, offsets: dict[tuple[str, int], int], epoch: int = 0,
               generation: int = -1, member: str = "", instance: str | None = None,
               pid: int = PID, group: str = "g") -> list[int]:
    topics: dict[str, list[CommitPartition]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(CommitPartition(p, o, -1, "m"))
    ev = TxnOffsetCommit(group, pid, epoch, tuple(CommitTopic(t, tuple(ps))
                                                  for t, ps in topics.items()),
                         generation, member, instance)
    r = ctx.reply(ctx.call(ev))
    assert isinstance(r, OffsetCommitResponse), r
    return [p.error_code for t in r.topics for p in t.partitions]


def test_staged_until_the_commit_marker() -> None:
    ctx = Ctx()
    ctx.commit({("t", 0): 3})
    assert txn_commit(ctx, {("t", 0): 10, ("t", 1): 11}) == [E.none, E.none]
    assert ctx.committed() == {("t", 0): 3}  # not yet
    assert txn_offsets.unstable_partitions(ctx.shard(), "g") == {("t", 0), ("t", 1)}
    staged = [r for r in ctx.records if getattr(r, "producer", None) == (PID, 0)]
    assert [r.key for r in staged] == [OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1)]
    ctx.marker(PID, 0, commit=True)
    assert ctx.committed() == {("t", 0): 10, ("t", 1): 11}
    assert txn_offsets.unstable_partitions(ctx.shard(), "g") == set()


def test_dropped_by_the_abort_marker_and_other_producers_untouched() -> None:
    ctx = Ctx()
    txn_commit(ctx, {("t", 0): 10})
    txn_commit(ctx, {("t", 1): 20}, pid=8)
    ctx.marker(PID, 0, commit=False)
    assert ctx.committed() == {}
    assert txn_offsets.unstable_partitions(ctx.shard(), "g") == {("t", 1)}
    ctx.marker(8, 0, commit=True)
    assert ctx.committed() == {("t", 1): 20}


def test_older_producer_epoch_is_fenced() -> None:
    ctx = Ctx()
    txn_commit(ctx, {("t", 0): 10}, epoch=2)
    ctx.marker(PID, 3, commit=False)  # the coordinator fenced epoch 2 with 3
    assert txn_commit(ctx, {("t", 0): 11}, epoch=2) == [E.producer_fenced]
    assert txn_commit(ctx, {("t", 0): 12}, epoch=4) == [E.none]


def test_classic_group_fences_zombies_by_generation_and_member() -> None:
    ctx = Ctx()
    (a, _), gen = ctx.stable_group(2)
    assert txn_commit(ctx, {("t", 0): 5}, generation=gen, member=a) == [E.none]
    assert txn_commit(ctx, {("t", 0): 5}, generation=gen + 1, member=a) \
        == [E.illegal_generation]
    assert txn_commit(ctx, {("t", 0): 5}, generation=gen, member="ghost") \
        == [E.unknown_member_id]
    # no group metadata (TxnOffsetCommit v0-2): accepted
    assert txn_commit(ctx, {("t", 0): 6}) == [E.none]
    assert txn_commit(ctx, {("t", 0): 6}, generation=1, group="nobody") \
        == [E.illegal_generation]


def test_consumer_group_fences_by_member_epoch() -> None:
    ctx = CCtx()
    r = ctx.hb("a", 0)
    epoch = r.member_epoch
    assert txn_commit(ctx, {("t1", 0): 5}, generation=epoch, member="a") == [E.none]
    assert txn_commit(ctx, {("t1", 0): 5}, generation=epoch + 1, member="a") \
        == [E.stale_member_epoch]
    assert txn_commit(ctx, {("t1", 0): 5}, generation=epoch, member="b") \
        == [E.unknown_member_id]
    ctx.marker(PID, 0, commit=True)
    assert ctx.committed() == {("t1", 0): 5}
    assert T1 in ctx.cgroup().members["a"].assigned


def test_open_transaction_survives_a_reload() -> None:
    """What the loader sees: transactional records wait for their marker, an open one stays
    pending in the reloaded shard (the conftest's replay check does the same with the
    harness's records)."""
    ctx = Ctx()
    txn_commit(ctx, {("t", 0): 10})
    txn_commit(ctx, {("t", 0): 20}, pid=8)
    ctx.marker(8, 0, commit=True)
    replayer = txn_offsets.Replayer()
    fresh = CoordinatorShard(0, ctx.coord.config)
    for r in ctx.records:
        replayed = (replayer.marker(r.producer_id, r.epoch, r.commit)
                    if isinstance(r, TxnMarker) else replayer.record(r.producer, r.key, r.value))
        for key, value in replayed:
            fresh.replay(key, value)
    replayer.restore(fresh)
    assert fresh.hard.offsets["g"][("t", 0)].offset == 20
    assert txn_offsets.unstable_partitions(fresh, "g") == {("t", 0)}


def test_a_commit_for_a_group_without_members_is_fetched_like_a_simple_groups() -> None:
    ctx = Ctx()
    txn_commit(ctx, {("t", 0): 10}, group="solo")
    ctx.marker(PID, 0, commit=True, group_id="solo")
    r = ctx.reply(ctx.call(OffsetFetch((FetchGroup("solo"),))))
    assert isinstance(r, OffsetFetchResponse)
    assert [(t.name, p.partition, p.committed_offset) for t in r.groups[0].topics
            for p in t.partitions] == [("t", 0, 10)]
