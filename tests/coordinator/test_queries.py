"""The read-only query API (``Coordinator.group_summaries``, ``group_summary``,
``group_state``, ``describe``) covers classic and KIP-848 consumer groups alike."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import DescribeGroups
from samsa.coordinator.consumer.group import ConsumerGroupState
from samsa.coordinator.queries import REBALANCING_STATE_NAMES, STATE_NAMES
from samsa.coordinator.responses import DescribeGroupsResponse
from samsa.coordinator.state import GroupState

from .consumer_ctx import T1, CCtx

E = ErrorCode


def test_summaries_cover_both_group_types() -> None:
    ctx = CCtx()
    ctx.stable_group(1, group_id="classic")
    ctx.hb("a", 0, instance_id="i", assignor="range")
    r = ctx.hb("b", 0)
    summaries = {s.group_id: s for s in ctx.coord.group_summaries()}
    assert set(summaries) == {"classic", "g"}
    assert summaries["classic"].group_type == "classic"
    assert summaries["classic"].state is GroupState.STABLE
    g = summaries["g"]
    epoch = ctx.cgroup().epoch
    assert (g.group_type, g.protocol_type, g.protocol, g.leader, g.members, g.generation) == (
        "consumer", "consumer", "range", "", 2, epoch)
    assert g.state is ConsumerGroupState.RECONCILING  # a must give partitions to b
    assert ctx.coord.group_summary("g") == g
    assert ctx.coord.group_state("g") == (ConsumerGroupState.RECONCILING, epoch)
    assert r.member_epoch <= epoch

    described = ctx.coord.describe("g")
    assert described is not None and described.summary == g
    assert set(described.member_ids) == {"a", "b"}
    a = next(m for m in described.members if m.member_id == "a")
    assert (a.group_instance_id, a.session_timeout_ms, a.rebalance_timeout_ms,
            a.metadata, a.assignment) == ("i", ctx.config.consumer_session_timeout_ms, 30_000,
                                          b"", b"")
    assert described.subscribed_topics == frozenset({"t1"})


def test_state_of_an_empty_and_a_removed_consumer_group() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    assert ctx.coord.group_state("g") == (ConsumerGroupState.STABLE, 2)
    ctx.hb("a", -1)
    empty = ctx.coord.group_summary("g")
    assert empty is not None and empty.state is ConsumerGroupState.EMPTY and empty.members == 0
    assert ctx.coord.group_summary("nope") is None and ctx.coord.group_state("nope") is None


def test_state_names_of_both_types() -> None:
    assert STATE_NAMES[:len(GroupState)] == tuple(s.value for s in GroupState)
    assert {"Assigning", "Reconciling"} <= set(STATE_NAMES)
    assert len(STATE_NAMES) == len(set(STATE_NAMES))
    assert {"PreparingRebalance", "CompletingRebalance",
                                       "Assigning", "Reconciling"} == REBALANCING_STATE_NAMES


def test_describe_groups_v6_errors() -> None:
    """Before v6 a group that is absent or not classic is Dead without an error; from v6
    GROUP_ID_NOT_FOUND with Kafka's messages. A classic group is described alike."""
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.stable_group(1, group_id="classic")
    for version in (5, 6):
        r = ctx.reply(ctx.call(DescribeGroups(("g", "none", "classic"), version)))
        assert isinstance(r, DescribeGroupsResponse)
        consumer, none, classic = r.groups
        assert (classic.error_code, classic.state, classic.error_message) == (
            E.none, "Stable", None)
        assert (consumer.state, consumer.members, none.state) == ("Dead", (), "Dead")
        if version < 6:
            assert (consumer.error_code, consumer.error_message) == (E.none, None)
            assert (none.error_code, none.error_message) == (E.none, None)
        else:
            assert (consumer.error_code, consumer.error_message) == (
                E.group_id_not_found, "Group g is not a classic group.")
            assert (none.error_code, none.error_message) == (
                E.group_id_not_found, "Group none not found.")
    assert ctx.cgroup().members["a"].assigned == {T1: frozenset({0, 1, 2})}
