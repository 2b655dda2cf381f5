"""Classic APIs on consumer groups, conversion of an empty classic group, offsets with
member epochs, deletion and listing, restart (replay) of consumer groups."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E

from samsa.coordinator import (
    ConsumerGroupDescribe,
    CoordinatorShard,
    DeleteGroups,
    DescribeGroups,
    FetchGroup,
    FetchTopic,
    LeaveGroup,
    LeavingMember,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
)
from samsa.coordinator.consumer.heartbeat import arm_loaded_timers  # noqa: F401
from samsa.coordinator.events import CommitPartition, CommitTopic
from samsa.coordinator.records import GroupMetadataKey
from samsa.coordinator.responses import (
    ConsumerGroupDescribeResponse,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
)
from samsa.coordinator.timers import TimerKind

from .consumer_ctx import T1, T2, CCtx, as_dict


def _commit(ctx: CCtx, member: str, epoch: int, version: int | None = 9) -> int:
    ev = OffsetCommit("g", (CommitTopic("t1", (CommitPartition(0, 5),)),), epoch, member,
                      api_version=version)
    r = ctx.reply(ctx.call(ev))
    assert isinstance(r, OffsetCommitResponse)
    return r.topics[0].partitions[0].error_code


def _fetch(ctx: CCtx, member: str | None, epoch: int) -> tuple[int, int]:
    r = ctx.reply(ctx.call(OffsetFetch((FetchGroup("g", (FetchTopic("t1", (0,)),), member,
                                                   epoch),))))
    assert isinstance(r, OffsetFetchResponse)
    group = r.groups[0]
    return group.error_code, group.topics[0].partitions[0].committed_offset if group.topics \
        else -1


def test_offset_commit_and_fetch_check_member_epochs() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    assert _commit(ctx, "a", 2) == E.none
    assert _commit(ctx, "a", 0) == E.stale_member_epoch
    assert _commit(ctx, "x", 2) == E.unknown_member_id
    assert _commit(ctx, "a", 2, version=8) == E.unsupported_version
    assert _commit(ctx, "", -1) == E.unknown_member_id  # admin commit on a live group
    assert _fetch(ctx, "a", 2) == (E.none, 5)
    assert _fetch(ctx, "a", 3)[0] == E.stale_member_epoch
    assert _fetch(ctx, "x", 2)[0] == E.unknown_member_id
    assert _fetch(ctx, None, -1) == (E.none, 5)  # admin fetch
    ctx.hb("a", -1)
    assert _commit(ctx, "", -1) == E.none  # empty group: admin commit


def test_offset_delete_and_delete_groups() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    _commit(ctx, "a", 2)
    ctx.call(OffsetCommit("g", (CommitTopic("old", (CommitPartition(0, 1),)),), 2, "a",
                          api_version=9))
    r = ctx.reply(ctx.call(OffsetDelete("g", (FetchTopic("t1", (0,)), FetchTopic("old", (0,))))))
    assert isinstance(r, OffsetDeleteResponse) and r.error_code == E.none
    codes = {t.name: t.partitions[0].error_code for t in r.topics}
    assert codes == {"t1": E.group_subscribed_to_topic, "old": E.none}
    r2 = ctx.reply(ctx.call(DeleteGroups(("g",))))
    assert isinstance(r2, DeleteGroupsResponse) and r2.groups[0].error_code == E.non_empty_group
    ctx.hb("a", -1)
    r2 = ctx.reply(ctx.call(DeleteGroups(("g",))))
    assert isinstance(r2, DeleteGroupsResponse) and r2.groups[0].error_code == E.none
    assert "g" not in ctx.shard().hard.consumer.groups and not ctx.shard().offsets_of("g")


def test_list_describe_and_consumer_group_describe() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, rack_id="r")
    ctx.stable_group(1, group_id="classic")
    r = ctx.reply(ctx.call(ListGroups()))
    assert isinstance(r, ListGroupsResponse)
    listed = {g.group_id: (g.group_type, g.protocol_type, g.state) for g in r.groups}
    assert listed == {"g": ("consumer", "consumer", "Stable"),
                      "classic": ("classic", "consumer", "Stable")}
    r = ctx.reply(ctx.call(ListGroups(types_filter=("Consumer",))))
    assert isinstance(r, ListGroupsResponse) and [g.group_id for g in r.groups] == ["g"]
    r = ctx.reply(ctx.call(ListGroups(types_filter=("classic",), states_filter=("stable",))))
    assert isinstance(r, ListGroupsResponse) and [g.group_id for g in r.groups] == ["classic"]
    d = ctx.reply(ctx.call(DescribeGroups(("g",))))
    assert isinstance(d, DescribeGroupsResponse) and d.groups[0].state == "Dead"
    c = ctx.reply(ctx.call(ConsumerGroupDescribe(("g", "classic", "none"))))
    assert isinstance(c, ConsumerGroupDescribeResponse)
    g, classic, none = c.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) \
        == (E.none, "Stable", 2, 2, "uniform")
    (m,) = g.members
    assert (m.member_id, m.rack_id, m.member_epoch) == ("a", "r", 2)
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment] == [("t1", (0, 1, 2))]
    assert m.assignment == m.target_assignment
    assert classic.error_code == none.error_code == E.group_id_not_found


def test_classic_calls_on_a_live_consumer_group() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i")
    j = ctx.join_reply(ctx.join("", protocol_type="connect"))  # classic members: see migration
    assert isinstance(j, JoinGroupResponse) and j.error_code == E.inconsistent_group_protocol
    h = ctx.reply(ctx.heartbeat("a", 2))
    assert isinstance(h, HeartbeatResponse) and h.error_code == E.unknown_member_id
    assert ctx.sync_reply(ctx.sync("a", 2)).error_code == E.unknown_member_id
    r = ctx.reply(ctx.call(LeaveGroup("g", (LeavingMember("a"), LeavingMember("", "nope"),
                                            LeavingMember("", "i")))))
    assert isinstance(r, LeaveGroupResponse)
    assert [m.error_code for m in r.members] == [E.unknown_member_id, E.unknown_member_id,
                                                 E.none]
    assert not ctx.cgroup().members  # removed by instance id (admin removal)


def test_join_group_on_an_empty_consumer_group_makes_it_classic() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.hb("a", -1)
    ctx.stable_group(1)
    assert "g" not in ctx.shard().hard.consumer.groups


def test_consumer_member_converts_an_empty_classic_group() -> None:
    ctx = CCtx()
    (m,), gen = ctx.stable_group(1)
    ctx.commit({("t1", 0): 3}, m, gen)
    ctx.leave(m)
    r = ctx.hb("a", 0)
    assert r.error_code == 0
    assert "g" not in ctx.shard().groups and "g" not in ctx.shard().hard.groups
    assert (GroupMetadataKey("g"), None) in [(x.key, x.value) for x in ctx.records]
    assert _fetch(ctx, "a", ctx.member("a").member_epoch) == (E.none, 3)  # offsets are kept


def test_restart_reloads_every_consumer_group_and_rearms_timers() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, regex="t.*", names=())
    # the regex is resolved after the join: its topics come with the next heartbeat
    owned = as_dict(ctx.hb("a", ctx.member("a").member_epoch, owned={}).assignment)
    assert owned == {T1: {0, 1, 2}, T2: {0, 1}}
    ctx.hb("b", 0, instance_id="i", rebalance_ms=20_000)
    ctx.hb("a", ctx.member("a").member_epoch, owned=owned)  # a revokes: a rebalance timer
    live = ctx.shard().hard.consumer
    fresh = CoordinatorShard(0, ctx.config)
    fresh.load([(r.key, r.value) for r in ctx.records], ctx.now)
    assert fresh.hard.consumer == live
    assert fresh.groups == {}  # not rebuilt as classic groups
    kinds = {k.kind for k in fresh.deadlines}
    assert {TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REBALANCE} <= kinds
    # the running coordinator reloads and goes on where it was
    ctx.coord.unload(0)
    ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now)
    assert ctx.shard().hard.consumer == live
    assert ctx.hb("b", ctx.member("b").member_epoch, instance_id="i", owned={}).error_code == 0


def test_offsets_of_an_empty_consumer_group_expire_and_the_group_goes() -> None:
    from samsa.coordinator import CoordinatorConfig

    ctx = CCtx(CoordinatorConfig(offsets_topic_num_partitions=1, offsets_retention_minutes=1,
                                 offsets_retention_check_interval_ms=10_000))
    ctx.hb("a", 0)
    assert _commit(ctx, "a", ctx.member("a").member_epoch) == E.none
    for _ in range(12):  # a live member subscribed to t1: its offsets are kept
        ctx.sleep(10_000)
        ctx.hb("a", ctx.member("a").member_epoch)
    assert ctx.shard().offsets_of("g") and "g" in ctx.shard().hard.consumer.groups
    ctx.hb("a", -1)
    ctx.sleep(10_000)
    assert not ctx.shard().offsets_of("g") and "g" not in ctx.shard().hard.consumer.groups
    assert not ctx.shard().offsets_of("g") and "g" not in ctx.shard().hard.consumer.groups
