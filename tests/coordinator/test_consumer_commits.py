"""Offset commits of consumer-group members checked against assignment epochs (KIP-1251),
on the fake clock: each row of the KIP's table, the epochs reconciliation stamps, a static
member's epochs across a rejoin, OffsetFetch (unchanged), and the records that carry them."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode as E

from samsa.coordinator import CoordinatorShard, FetchGroup, FetchTopic, OffsetCommit, OffsetFetch
from samsa.coordinator.consumer.commits import validate_offset_commit
from samsa.coordinator.consumer.group import MemberState
from samsa.coordinator.consumer.records import (
    AssignedTopicPartitions,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
)
from samsa.coordinator.events import CommitPartition, CommitTopic
from samsa.coordinator.records import deserialize, serialize
from samsa.coordinator.responses import OffsetCommitResponse, OffsetFetchResponse

from .consumer_ctx import T1, T2, CCtx, as_dict

NAMES = {T1: "t1", T2: "t2"}


def commit(ctx: CCtx, member: str, epoch: int, *parts: tuple[uuid.UUID, int],
           metadata: str = "") -> list[int]:
    """OffsetCommit v9 of offset 7 for ``parts``; the error of each partition."""
    topics = {}
    for t, p in parts:
        topics.setdefault(NAMES[t], []).append(CommitPartition(p, 7, metadata=metadata))
    ev = OffsetCommit("g", tuple(CommitTopic(n, tuple(ps)) for n, ps in topics.items()),
                      epoch, member, api_version=9)
    r = ctx.reply(ctx.call(ev))
    assert isinstance(r, OffsetCommitResponse)
    return [p.error_code for t in r.topics for p in t.partitions]


def epochs(ctx: CCtx, member: str) -> dict[tuple[uuid.UUID, int], int]:
    return dict(ctx.member(member).assignment_epochs)


def two_members() -> CCtx:
    """a joined alone (epoch 2, t1-0..2: a new group starts at epoch 1, KAFKA-20268); b
    joined (epoch 3): a gave up one partition and moved to epoch 3 keeping the other two,
    which it was given at epoch 2; b then got the freed one at epoch 3."""
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    r = ctx.hb("a", 2, owned={T1: {0, 1, 2}})
    assert r.member_epoch == 2 and ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.hb("a", 2, owned=as_dict(r.assignment)).member_epoch == 3
    assert ctx.hb("b", 3, owned={}).member_epoch == 3
    return ctx


def test_reconciliation_stamps_each_partition_with_the_epoch_it_was_given_at() -> None:
    ctx = two_members()
    a_parts = ctx.member("a").assigned[T1]
    (b_part,) = ctx.member("b").assigned[T1]
    assert len(a_parts) == 2 and b_part not in a_parts
    assert epochs(ctx, "a") == {(T1, p): 2 for p in a_parts}  # kept from epoch 2
    assert epochs(ctx, "b") == {(T1, b_part): 3}  # new at epoch 3
    # b leaves: a gets b's partition at epoch 4, and keeps the epochs of its own
    ctx.hb("b", -1)
    ctx.hb("a", 3, owned={T1: set(a_parts)})
    assert ctx.member("a").member_epoch == 4
    assert epochs(ctx, "a") == {**{(T1, p): 2 for p in a_parts}, (T1, b_part): 4}


def test_the_kips_table() -> None:
    """``assignmentEpoch(partition) <= clientEpoch <= brokerEpoch``, row by row."""
    ctx = two_members()
    p0, p1 = sorted(ctx.member("a").assigned[T1])  # a: given at 2, member epoch 3
    (pb,) = ctx.member("b").assigned[T1]  # b's, given at 3
    # client epoch == broker epoch: accepted (every partition, as Kafka)
    assert commit(ctx, "a", 3, (T1, p0)) == [E.none]
    # client epoch newer than the broker's: stale
    assert commit(ctx, "a", 4, (T1, p0)) == [E.stale_member_epoch]
    # older epoch, the member holds the partition since that epoch or before: accepted
    assert commit(ctx, "a", 2, (T1, p0), (T1, p1)) == [E.none, E.none]
    # older epoch, the partition belongs to another member: stale
    assert commit(ctx, "a", 2, (T1, pb)) == [E.stale_member_epoch]
    # older epoch, nobody holds the partition (t2 is not subscribed): stale
    assert commit(ctx, "a", 2, (T2, 0)) == [E.stale_member_epoch]
    # older epoch, the member was given the partition after it: stale
    ctx.hb("b", -1)
    ctx.hb("a", 3, owned={T1: {p0, p1}})
    assert ctx.member("a").member_epoch == 4
    assert commit(ctx, "a", 3, (T1, p0)) == [E.none]
    assert commit(ctx, "a", 3, (T1, pb)) == [E.stale_member_epoch]
    assert commit(ctx, "a", 4, (T1, pb)) == [E.none]
    # an unknown member, whatever its epoch
    assert commit(ctx, "b", 3, (T1, p0)) == [E.unknown_member_id]


def test_one_refused_partition_refuses_the_whole_commit() -> None:
    ctx = two_members()
    p0, _ = sorted(ctx.member("a").assigned[T1])
    (pb,) = ctx.member("b").assigned[T1]
    before = ctx.committed()
    assert commit(ctx, "a", 2, (T1, p0), (T1, pb)) == [E.stale_member_epoch] * 2
    assert ctx.committed() == before  # nothing written
    # metadata too large: that partition fails alone and is not checked (Kafka's order)
    big = "x" * (ctx.config.offset_metadata_max_bytes + 1)
    assert commit(ctx, "a", 2, (T1, pb), metadata=big) == [E.offset_metadata_too_large]


def test_a_revoking_member_commits_what_it_gives_up_with_an_older_epoch() -> None:
    """c joins: a must give a partition up and stays in epoch 3 until it has; its
    revoking partition was given at epoch 2, so a commit at epoch 2 is still accepted."""
    ctx = two_members()
    ctx.hb("c", 0)
    r = ctx.hb("a", 3, owned={T1: set(ctx.member("a").assigned[T1])})
    a = ctx.member("a")
    assert a.state is MemberState.UNREVOKED_PARTITIONS and a.member_epoch == 3
    (revoking,) = a.pending_revocation[T1]
    assert epochs(ctx, "a")[(T1, revoking)] == 2
    assert commit(ctx, "a", 2, (T1, revoking)) == [E.none]
    assert commit(ctx, "a", 3, (T1, revoking)) == [E.none]
    # once released, it is nobody's until c gets it
    ctx.hb("a", 3, owned=as_dict(r.assignment))
    assert ctx.member("a").member_epoch == 4
    assert commit(ctx, "a", 3, (T1, revoking)) == [E.stale_member_epoch]


def test_offset_fetch_still_wants_the_exact_epoch() -> None:
    ctx = two_members()
    p0, _ = sorted(ctx.member("a").assigned[T1])

    def fetch(epoch: int) -> int:
        r = ctx.reply(ctx.call(OffsetFetch((FetchGroup("g", (FetchTopic("t1", (p0,)),), "a",
                                                       epoch),))))
        assert isinstance(r, OffsetFetchResponse)
        return r.groups[0].error_code

    assert (fetch(3), fetch(2), fetch(4)) == (E.none, E.stale_member_epoch,
                                              E.stale_member_epoch)


def test_a_static_member_keeps_its_partitions_at_epoch_0_across_a_rejoin() -> None:
    """A static member that leaves with epoch -2 keeps its partitions for its instance id
    at assignment epoch 0 (Kafka's resetAssignedPartitionsEpochsToZero); the process that
    comes back under a new member id gets them at once and may commit them; partitions it
    gets later carry their own epoch."""
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i1")
    ctx.hb("b", 0, instance_id="i2")
    owned = {"a": {T1: {0, 1, 2}}, "b": {}}
    ctx.settle(owned)
    a_parts = ctx.member("a").assigned[T1]
    epoch = ctx.cgroup().epoch
    ctx.hb("a", -2, instance_id="i1")
    left = ctx.records[-1]
    assert isinstance(left.key, ConsumerGroupCurrentMemberAssignmentKey)
    assert left.value == ConsumerGroupCurrentMemberAssignmentValue(
        -2, ctx.member("a").previous_member_epoch, 0,
        (AssignedTopicPartitions(T1, tuple(sorted(a_parts)), (0,) * len(a_parts)),), ())
    r = ctx.hb("a2", 0, instance_id="i1")
    assert r.error_code == 0 and r.member_epoch == epoch  # no rebalance
    assert epochs(ctx, "a2") == {(T1, p): 0 for p in a_parts}
    kept = [(T1, p) for p in sorted(a_parts)]
    assert commit(ctx, "a2", epoch, *kept) == [E.none] * len(kept)
    assert commit(ctx, "a2", 0, *kept) == [E.none] * len(kept)
    assert commit(ctx, "a", epoch, kept[0]) == [E.unknown_member_id]  # replaced
    # a2 subscribes to t2 as well: what it is given now carries the new epoch
    owned = {"a2": {T1: set(a_parts)}, "b": as_dict(ctx.hb("b", epoch, full=True).assignment)}
    r = ctx.hb("a2", epoch, names=("t1", "t2"), owned=owned["a2"], full=True)
    owned["a2"] = as_dict(r.assignment)
    ctx.settle(owned)
    a2 = ctx.member("a2")
    assert a2.member_epoch == epoch + 1 and T2 in a2.assigned
    for (t, p), given in epochs(ctx, "a2").items():
        assert given == (0 if t == T1 else epoch + 1), (t, p)


def test_a_static_member_that_left_cannot_commit() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i1")
    ctx.hb("a", -2, instance_id="i1")
    assert commit(ctx, "a", 2, (T1, 0)) == [E.stale_member_epoch]  # 2 > -2


def test_admin_and_version_checks_come_first() -> None:
    ctx = two_members()
    group = ctx.cgroup()
    assert validate_offset_commit(group, "", -1, 9).error == E.unknown_member_id  # live group
    assert validate_offset_commit(group, "a", 1, 8).error == E.unsupported_version
    assert validate_offset_commit(group, "a", 1, None).member is not None  # TxnOffsetCommit


def test_assignment_epochs_survive_bytes_and_a_reload() -> None:
    ctx = two_members()
    ctx.hb("c", 0)
    ctx.hb("a", 3, owned={T1: set(ctx.member("a").assigned[T1])})  # a is revoking
    records = [deserialize(*serialize(r.key, r.value)) for r in ctx.records]
    fresh = CoordinatorShard(0, ctx.config)
    fresh.load([r for r in records if r is not None], ctx.now)
    assert fresh.hard.consumer == ctx.shard().hard.consumer
    assert fresh.hard.consumer.groups["g"].members["a"].assignment_epochs == \
        ctx.member("a").assignment_epochs
