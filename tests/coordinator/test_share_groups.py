"""Share groups (KIP-932) in the coordinator: ShareGroupHeartbeat, the simple assignor,
epochs, sessions, describe/list/delete, and replay (the conftest replays every scenario's
records through their byte formats and compares the shards)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import CoordinatorConfig, DeleteGroups, DescribeGroups, ListGroups
from samsa.coordinator.events import (
    FetchGroup,
    FetchTopic,
    OffsetDelete,
    OffsetFetch,
    ShareGroupOffsetsChange,
    SyncGroup,
)
from samsa.coordinator.responses import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    ShareGroupOffsetsChangeResponse,
)
from samsa.coordinator.share.records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
)
from tests.coordinator.consumer_ctx import T1, T2

from .share_ctx import SCtx, as_dict

E = ErrorCode


def test_join_gets_every_partition_and_epoch_1() -> None:
    ctx = SCtx()
    r = ctx.shb("m1", 0, names=("t1", "t2"))
    assert (r.error_code, r.member_id, r.member_epoch) == (E.none, "m1", 1)
    assert r.heartbeat_interval_ms == 5000
    assert as_dict(r.assignment) == {T1: {0, 1, 2}, T2: {0, 1}}
    keys = [type(rec.key) for rec in ctx.records]
    assert keys[:3] == [ShareGroupMetadataKey, ShareGroupMemberMetadataKey, ShareGroupMetadataKey]
    assert keys[-1] is ShareGroupCurrentMemberAssignmentKey
    # a heartbeat with nothing new: same epoch, no assignment
    r = ctx.shb("m1", 1)
    assert (r.error_code, r.member_epoch, r.assignment) == (E.none, 1, None)


def test_more_members_than_partitions_share_partitions() -> None:
    ctx = SCtx()
    for i in range(5):
        ctx.shb(f"m{i}", 0)
    for i in range(5):
        r = ctx.shb(f"m{i}", ctx.share_group().members[f"m{i}"].member_epoch)
        assert r.error_code == E.none
    got = [ctx.assigned(f"m{i}") for i in range(5)]
    # every member gets a partition of t1 (3), each partition goes to 2 members (6 places)
    assert sorted(len(a[T1]) for a in got) == [1, 1, 1, 1, 2]
    assert set().union(*(a[T1] for a in got)) == {0, 1, 2}
    assert ctx.share_group().epoch == 5


def test_fewer_members_than_partitions_split_them() -> None:
    ctx = SCtx()
    ctx.shb("a", 0)
    ctx.shb("b", 0, names=("t1",))
    ra = ctx.shb("a", 1)
    assert ra.member_epoch == 2 and ra.assignment is not None
    assert ctx.assigned("a")[T1] | ctx.assigned("b")[T1] == {0, 1, 2}
    assert not ctx.assigned("a")[T1] & ctx.assigned("b")[T1]


def test_epochs_are_checked() -> None:
    ctx = SCtx()
    ctx.shb("a", 0)
    assert ctx.shb("a", 7).error_code == E.fenced_member_epoch
    assert ctx.shb("nobody", 1).error_code == E.unknown_member_id
    assert ctx.shb("a", 1, group_id="other").error_code == E.group_id_not_found
    assert ctx.shb("", 0).error_code == E.invalid_request
    assert ctx.shb("a", 0, names=()).error_code == E.invalid_request


def test_leave_and_session_expiry_remove_members() -> None:
    ctx = SCtx(config=CoordinatorConfig(offsets_topic_num_partitions=1,
                                        share_session_timeout_ms=1_000,
                                        share_heartbeat_interval_ms=100))
    ctx.shb("a", 0)
    ctx.shb("b", 0)
    r = ctx.shb("a", -1)
    assert (r.error_code, r.member_epoch) == (E.none, -1)
    assert list(ctx.share_group().members) == ["b"]
    ctx.sleep(1_001)
    assert not ctx.share_group().members
    assert ctx.share_group().epoch == 4


def test_describe_list_and_delete() -> None:
    ctx = SCtx()
    ctx.shb("a", 0, rack_id="r1")
    group = ctx.sdescribe("g", "nope").groups
    assert (group[0].error_code, group[0].group_state, group[0].assignor_name) == \
        (E.none, "Stable", "simple")
    member = group[0].members[0]
    assert (member.member_id, member.rack_id, member.member_epoch) == ("a", "r1", 1)
    assert [(t.topic_name, t.partitions) for t in member.assignment] == [("t1", (0, 1, 2))]
    assert group[1].error_code == E.group_id_not_found
    listed = ctx.reply(ctx.call(ListGroups(types_filter=("share",))))
    assert [(g.group_id, g.group_type, g.protocol_type, g.state)
            for g in listed.groups] == [("g", "share", "share", "Stable")]  # type: ignore[union-attr]
    described = ctx.reply(ctx.call(DescribeGroups(("g",), api_version=6)))
    assert isinstance(described, DescribeGroupsResponse)
    assert described.groups[0].error_code == E.group_id_not_found
    deleted = ctx.reply(ctx.call(DeleteGroups(("g",))))
    assert isinstance(deleted, DeleteGroupsResponse)
    assert deleted.groups[0].error_code == E.non_empty_group
    ctx.shb("a", -1)
    deleted = ctx.reply(ctx.call(DeleteGroups(("g",))))
    assert isinstance(deleted, DeleteGroupsResponse)
    assert deleted.groups[0].error_code == E.none
    assert "g" not in ctx.shard().hard.share.groups


def test_a_classic_group_id_is_not_a_share_group() -> None:
    ctx = SCtx()
    ctx.hb("c1", 0)  # a consumer group "g"
    r = ctx.shb("a", 0)
    assert r.error_code == E.group_id_not_found
    ctx.shb("a", 0, group_id="s")
    join = ctx.join(group_id="s")
    assert ctx.join_reply(join).error_code == E.inconsistent_group_protocol


def test_a_reload_keeps_the_group_and_restarts_sessions() -> None:
    ctx = SCtx()
    ctx.shb("a", 0)
    ctx.shb("b", 0)
    before = ctx.share_group()
    ctx.absorb(ctx.coord.unload(0))
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now))
    assert ctx.share_group() == before
    assert ctx.shb("b", 2).error_code == E.none


def test_group_configs_set_the_session_and_heartbeat() -> None:
    overrides = {"share.session.timeout.ms": 700, "share.heartbeat.interval.ms": 90}
    ctx = SCtx(config=CoordinatorConfig(
        offsets_topic_num_partitions=1,
        group_configs=lambda gid: overrides if gid == "g" else {}))
    assert ctx.shb("a", 0).heartbeat_interval_ms == 90
    assert ctx.shb("a", 0, group_id="other").heartbeat_interval_ms == 5000
    ctx.sleep(701)
    assert not ctx.share_group().members
    assert list(ctx.share_group("other").members) == ["a"]


def test_share_is_an_accepted_rebalance_protocol() -> None:
    CoordinatorConfig.from_properties(
        {"group.coordinator.rebalance.protocols": "classic,consumer,share"}).validate()


def test_classic_and_consumer_apis_on_a_share_group_are_refused_as_kafka_does() -> None:
    """Kafka's ShareGroup: no offsets in __consumer_offsets (commit, fetch and delete are
    GROUP_ID_NOT_FOUND), not a classic or consumer group (GROUP_ID_NOT_FOUND; a join is
    INCONSISTENT_GROUP_PROTOCOL); nothing is written for any of them."""
    ctx = SCtx()
    ctx.shb("a", 0)
    written = len(ctx.records)
    commit = ctx.reply(ctx.commit({("t1", 0): 5}))
    assert isinstance(commit, OffsetCommitResponse)
    assert commit.topics[0].partitions[0].error_code == E.group_id_not_found
    fetched = ctx.reply(ctx.call(OffsetFetch((FetchGroup("g"), FetchGroup("other")))))
    assert isinstance(fetched, OffsetFetchResponse)
    assert [g.error_code for g in fetched.groups] == [E.group_id_not_found, E.none]
    deleted = ctx.reply(ctx.call(OffsetDelete("g", (FetchTopic("t1", (0,)),))))
    assert isinstance(deleted, OffsetDeleteResponse)
    assert deleted.error_code == E.group_id_not_found
    for token in (ctx.heartbeat("a", 1), ctx.leave("a"), ctx.call(SyncGroup("g", 1, "a"))):
        response = ctx.reply(token)
        assert response is not None and response.error_code == E.group_id_not_found, response
    assert ctx.hb("c1", 0).error_code == E.group_id_not_found
    assert len(ctx.records) == written
    assert list(ctx.share_group().members) == ["a"]


def test_the_offsets_expiry_sweep_keeps_an_empty_share_group() -> None:
    """Kafka's ShareGroup.shouldExpire is false: only DeleteGroups deletes it."""
    ctx = SCtx(config=CoordinatorConfig(offsets_topic_num_partitions=1,
                                        offsets_retention_check_interval_ms=1_000))
    ctx.shb("a", 0)
    ctx.shb("a", -1)
    ctx.sleep(3_001)
    assert ctx.share_group().epoch == 2 and not ctx.share_group().members


def test_altering_offsets_creates_a_missing_share_group_empty() -> None:
    """AlterShareGroupOffsets' group step (Kafka's ``alterShareGroupOffsets``): a missing
    group is created, empty at epoch 0, and described and listed from then on (and after a
    reload); a group with members, or of another type, is refused; DeleteShareGroupOffsets'
    step creates nothing."""
    ctx = SCtx()

    def change(gid: str, create: bool) -> tuple[int, str | None]:
        r = ctx.reply(ctx.call(ShareGroupOffsetsChange(gid, create)))
        assert isinstance(r, ShareGroupOffsetsChangeResponse)
        return r.error_code, r.error_message

    assert change("new", False)[0] == E.group_id_not_found
    assert "new" not in ctx.shard().hard.share.groups
    assert change("new", True) == (E.none, None)
    described = ctx.sdescribe("new").groups[0]
    assert (described.error_code, described.group_state, described.group_epoch,
            described.members) == (E.none, "Empty", 0, ())
    listed = ctx.reply(ctx.call(ListGroups(types_filter=("share",))))
    assert [(g.group_id, g.state) for g in listed.groups] == [("new", "Empty")]  # type: ignore[union-attr]
    assert change("new", True) == (E.none, None)  # exists: nothing more written
    assert [type(r.key) for r in ctx.records].count(ShareGroupMetadataKey) == 1
    ctx.absorb(ctx.coord.unload(0))
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now))
    assert ctx.sdescribe("new").groups[0].group_state == "Empty"
    # its first member joins it at epoch 1
    r = ctx.shb("a", 0, group_id="new")
    assert (r.error_code, r.member_epoch) == (E.none, 1)
    assert change("new", True)[0] == E.non_empty_group
    ctx.hb("c1", 0)  # a consumer group "g"
    assert change("g", True)[0] == E.group_id_not_found
