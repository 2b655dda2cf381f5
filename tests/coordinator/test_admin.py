"""DescribeGroups, ListGroups, DeleteGroups and group id validation."""

from __future__ import annotations

import pytest

from samsa.coordinator import (
    CoordinatorConfig,
    DeleteGroups,
    DescribeGroups,
    Event,
    FetchGroup,
    FetchTopic,
    GroupState,
    Heartbeat,
    LeaveGroup,
    LeavingMember,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
)
from samsa.coordinator.records import GroupMetadataKey, OffsetCommitKey
from samsa.coordinator.responses import (
    DeletedGroup,
    DeleteGroupsResponse,
    DescribedMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
)

from .harness import SUB, Ctx

S = GroupState


def describe(ctx: Ctx, *groups: str) -> DescribeGroupsResponse:
    r = ctx.reply(ctx.call(DescribeGroups(groups)))
    assert isinstance(r, DescribeGroupsResponse)
    return r


def test_describe_stable_group_shows_protocol_metadata_and_assignment() -> None:
    ctx = Ctx()
    (a, b), _ = ctx.stable_group(2)
    (g,) = describe(ctx, "g").groups
    assert (g.error_code, g.state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert g.members == (
        DescribedMember(a, None, "c", "/127.0.0.1", SUB, a.encode()),
        DescribedMember(b, None, "c", "/127.0.0.1", SUB, b.encode()),
    )


def test_describe_rebalancing_group_hides_protocol_and_member_data() -> None:
    ctx = Ctx()
    (a, b), _ = ctx.stable_group(2)
    ctx.join(a)
    (g,) = describe(ctx, "g").groups
    assert (g.state, g.protocol_data) == ("PreparingRebalance", "")
    assert [(m.member_id, m.metadata, m.assignment) for m in g.members] == [
        (a, b"", b""),
        (b, b"", b""),
    ]


def test_list_groups_filters_states_case_insensitively() -> None:
    ctx = Ctx()
    ctx.stable_group(1, group_id="s")
    ctx.commit({("t", 0): 1}, group_id="simple")

    def listed(**kw: tuple[str, ...]) -> set[ListedGroup]:
        r = ctx.reply(ctx.call(ListGroups(**kw)))
        assert isinstance(r, ListGroupsResponse) and r.error_code == 0
        return set(r.groups)

    stable = ListedGroup("s", "consumer", "Stable")
    simple = ListedGroup("simple", "", "Empty")
    assert listed() == {stable, simple}
    assert listed(states_filter=("stable",)) == {stable}
    assert listed(states_filter=("EMPTY", "dead")) == {simple}
    assert listed(types_filter=("Classic",)) == {stable, simple}
    assert listed(types_filter=("consumer",)) == set()


def test_delete_groups_writes_tombstones_for_offsets_and_metadata() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    ctx.commit({("t", 0): 1, ("t", 1): 1}, a, gen)
    ctx.commit({("t", 0): 1}, group_id="simple")
    r = ctx.reply(ctx.call(DeleteGroups(("g",))))
    assert r == DeleteGroupsResponse((DeletedGroup("g", 68),))
    ctx.leave(a)
    before = len(ctx.records)
    r = ctx.reply(ctx.call(DeleteGroups(("g", "simple", "nope"))))
    assert r == DeleteGroupsResponse(
        (DeletedGroup("g", 0), DeletedGroup("simple", 0), DeletedGroup("nope", 69))
    )
    written = ctx.records[before:]
    assert all(rec.value is None for rec in written)
    # g: two offsets + its metadata; simple (generation 0): its offset only
    assert [rec.key for rec in written] == [
        OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1), GroupMetadataKey("g"),
        OffsetCommitKey("simple", "t", 0)]
    assert ctx.shard().hard.groups == {} and ctx.shard().hard.offsets == {}
    assert ctx.state() is S.DEAD and ctx.state("simple") is S.DEAD
    ctx.check_replay()


INVALID_GROUP_ID = 24


@pytest.mark.parametrize(
    "event",
    [
        SyncGroup("", 1, "m"),
        Heartbeat("", 1, "m"),
        LeaveGroup("", (LeavingMember("m"),)),
        OffsetDelete("", (FetchTopic("t", (0,)),)),
    ],
)
def test_empty_group_id_is_invalid_for_group_management(event: Event) -> None:
    ctx = Ctx()
    r = ctx.reply(ctx.call(event))
    assert getattr(r, "error_code", None) == INVALID_GROUP_ID


def test_empty_group_id_join_is_invalid() -> None:
    ctx = Ctx()
    assert ctx.join_reply(ctx.join(group_id="")).error_code == INVALID_GROUP_ID


def test_empty_group_id_is_fine_for_offsets_describe_delete() -> None:
    ctx = Ctx()
    t = ctx.call(OffsetCommit("", ()))
    assert ctx.reply(t) is not None
    r = ctx.reply(ctx.call(OffsetFetch((FetchGroup(""),))))
    assert r.groups[0].error_code == 0  # type: ignore[union-attr]
    assert describe(ctx, "").groups[0].error_code == 0
    r = ctx.reply(ctx.call(DeleteGroups(("",))))
    assert r.groups[0].error_code in (0, 69)  # type: ignore[union-attr]


def test_requests_for_groups_of_other_shards_are_not_coordinator() -> None:
    ctx = Ctx(CoordinatorConfig(offsets_topic_num_partitions=50), partitions=[0])
    gid = "group"  # partition 47
    assert ctx.join_reply(ctx.join(group_id=gid)).error_code == 16
    assert describe(ctx, gid).groups[0].error_code == 16
