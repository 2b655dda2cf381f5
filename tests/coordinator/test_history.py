"""The rebalance history on the fake clock: causes, phases, who held each phase up,
persistence through a reload, the bound per group, and its binary form."""

from __future__ import annotations

from dataclasses import replace

from samsa.coordinator import CoordinatorConfig, LeaveGroup, LeavingMember, TopicInfo
from samsa.coordinator.events import DeleteGroups
from samsa.coordinator.history import Cause, HistoryEvent, HistoryKey, LoadInfo, Outcome, codec
from samsa.coordinator.history.model import Phase
from samsa.coordinator.records import deserialize, serialize

from .consumer_ctx import T1, T2, CCtx
from .harness import Ctx

# consumer-group targets inline and at once (KIP-1263's interval and offload off), as CCtx's own
ON = CoordinatorConfig(offsets_topic_num_partitions=1, history_max_events=100,
                       initial_rebalance_delay_ms=0, consumer_assignment_interval_ms=0,
                       consumer_assignor_offload_enable=False)


def history_ctx(limit: int = 100) -> Ctx:
    return Ctx(config=replace(ON, history_max_events=limit))


def phases(event: HistoryEvent) -> list[str]:
    return [p.name for p in event.phases]


def test_a_first_rebalance_is_one_event_with_its_phases_and_the_leader_holding_the_sync() -> None:
    ctx = history_ctx()
    (a, b), gen = ctx.stable_group(2)
    [event] = ctx.coord.history("g")
    assert (event.cause, event.member_id, event.epoch_before, event.epoch_after) == (
        Cause.MEMBER_JOINED, a, 0, gen)
    assert phases(event) == ["PreparingRebalance", "CompletingRebalance", "Stable"]
    assert event.outcome is Outcome.STABLE and event.member_count == 2
    leader = ctx.describe().summary.leader
    assert event.phases[-1].held_by == (leader,)
    assert event.phases[1].held_by[0] == b  # the last JoinGroup completed the join phase


def test_a_session_expiry_names_the_member_and_the_time_to_stable() -> None:
    ctx = history_ctx()
    (a, b), gen = ctx.stable_group(2)
    ctx.sleep(4000)
    ctx.heartbeat(a, gen)
    ctx.sleep(7000)  # b's 10 s session ran out; a is parked in nothing yet
    assert ctx.state().value == "PreparingRebalance"
    tok = ctx.join(a)
    r = ctx.join_reply(tok)
    ctx.sync(a, r.generation_id, ((a, b"x"),))
    event = ctx.coord.history("g")[-1]
    assert (event.cause, event.member_id, event.epoch_after) == (
        Cause.SESSION_EXPIRED, b, gen + 1)
    assert event.outcome is Outcome.STABLE
    assert event.ended_ms is not None and event.ended_ms >= event.at_ms


def test_a_leave_keeps_the_clients_reason_and_an_admin_removal_is_told_apart() -> None:
    ctx = history_ctx()
    (_, b, c), _ = ctx.stable_group(3)
    ctx.call(LeaveGroup("g", (LeavingMember(b, reason="the consumer is being closed"),)))
    event = ctx.coord.history("g")[-1]
    assert (event.cause, event.member_id, event.reason) == (
        Cause.MEMBER_LEFT, b, "the consumer is being closed")
    # c leaves too while the group rebalances: the same rebalance, no new event
    ctx.call(LeaveGroup("g", (LeavingMember(c, reason="the consumer is being closed"),)))
    assert len(ctx.coord.history("g")) == 2
    ctx.stable_group(1, group_id="h")
    [member] = ctx.describe("h").member_ids
    ctx.call(LeaveGroup("h", (LeavingMember(member, reason="removed by an administrator"),)))
    assert ctx.coord.history("h")[-1].cause is Cause.ADMIN_REMOVAL


def test_a_rebalance_timeout_names_the_members_that_did_not_rejoin() -> None:
    ctx = history_ctx()
    (a, b), gen = ctx.stable_group(2)
    leader = ctx.describe().summary.leader
    other = b if leader == a else a
    ctx.join(leader)  # the leader rejoins: the group rebalances, the other never rejoins
    for _ in range(7):  # keeps its session alive, but does not rejoin in 30 s
        ctx.sleep(5000)
        ctx.heartbeat(other, gen)
    event = ctx.coord.history("g")[-1]
    assert event.cause is Cause.MEMBER_REJOINED and event.member_id == leader
    completing = event.phases[1]
    assert completing.name == "CompletingRebalance" and completing.held_by == (other,)
    assert "rebalance timeout" in completing.note
    assert completing.at_ms - event.at_ms >= 30_000


def test_a_consumer_group_event_is_computed_then_reconciled_by_its_last_member() -> None:
    ctx = CCtx(config=ON)
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    a, b = ctx.member("a"), ctx.member("b")
    owned = {"a": {t: set(ps) for t, ps in a.assigned.items()}, "b": {}}
    ctx.settle(owned)
    joined = ctx.coord.history("g")
    assert [e.cause for e in joined] == [Cause.MEMBER_JOINED, Cause.MEMBER_JOINED]
    first, second = joined
    # KAFKA-20268: a new group starts at epoch 1, a's join takes it to 2
    assert (second.member_id, second.epoch_before, second.epoch_after) == ("b", 2, 3)
    assert phases(first) == ["Assigning", "TargetComputed", "Reconciled"]
    assert phases(second) == ["Assigning", "TargetComputed", "Reconciled"]
    assert second.outcome is Outcome.STABLE
    reconciled = second.phases[-1]
    assert reconciled.held_by[0] == b.member_id  # b got its partitions once a released them
    assert "waited for a to revoke partitions" in reconciled.note


def test_partitions_added_are_a_topics_changed_event() -> None:
    ctx = CCtx(config=ON)
    ctx.hb("a", 0)
    epoch = ctx.member("a").member_epoch
    ctx.hb("a", epoch, owned={T1: {0, 1, 2}})
    ctx.set_topics(TopicInfo(T1, "t1", 5), TopicInfo(T2, "t2", 2))
    ctx.hb("a", epoch, owned={T1: {0, 1, 2}})
    event = ctx.coord.history("g")[-1]
    assert (event.cause, event.epoch_before, event.epoch_after) == (
        Cause.TOPICS_CHANGED, epoch, epoch + 1)


def test_the_history_survives_a_reload_and_notes_the_load() -> None:
    ctx = history_ctx()
    ctx.stable_group(2)
    before = ctx.coord.history("g")
    ctx.absorb(ctx.coord.unload(0))
    ctx.sleep(50)
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now,
                              LoadInfo(ctx.now - 40, node_id=2, previous_node=1, lease_epoch=7)))
    after = ctx.coord.history("g")
    assert after[:-1] == before
    loaded = after[-1]
    assert loaded.cause is Cause.COORDINATOR_LOADED and loaded.outcome is Outcome.NOTED
    assert dict(loaded.detail)["load_ms"] == "40"
    assert dict(loaded.detail)["previous_node"] == "1" and "fail-over" in (loaded.reason or "")


def test_the_history_is_bounded_per_group() -> None:
    ctx = history_ctx(limit=3)
    ids, gen = ctx.stable_group(1)
    for _ in range(5):
        tok = ctx.join(ids[0])
        gen = ctx.join_reply(tok).generation_id
        ctx.sync(ids[0], gen, ((ids[0], b""),))
    events = ctx.coord.history("g")
    assert [e.seq for e in events] == [4, 5, 6]
    assert {r.key.slot for r in ctx.records if isinstance(r.key, HistoryKey)} == {0, 1, 2}


def test_no_history_records_when_it_is_off() -> None:
    ctx = Ctx(config=replace(ON, history_max_events=0))
    ctx.stable_group(2)
    assert not [r for r in ctx.records if isinstance(r.key, HistoryKey)]
    assert ctx.coord.history("g") == []


def test_an_admin_offset_reset_of_an_empty_group_is_noted() -> None:
    ctx = history_ctx()
    (a,), _ = ctx.stable_group(1)
    ctx.leave(a)
    ctx.commit({("t", 0): 5, ("t", 1): 7})
    event = ctx.coord.history("g")[-1]
    assert event.cause is Cause.OFFSETS_RESET and dict(event.detail)["partitions"] == "2"
    ctx.commit({("t", 0): 1}, group_id="simple")  # a group that never had members: no event
    assert ctx.coord.history("simple") == []


def test_deleting_a_group_deletes_its_history() -> None:
    ctx = history_ctx()
    (a,), _ = ctx.stable_group(1)
    ctx.leave(a)
    ctx.call(DeleteGroups(("g",)))
    assert ctx.coord.history("g") == []
    assert not ctx.shard().hard.history.groups


def test_history_records_round_trip_and_are_a_type_of_their_own() -> None:
    event = HistoryEvent(
        7, "consumer", Cause.REBALANCE_TIMEOUT, 123, "m-1", "reason é", ("m-2", "m-3"), 4, 5,
        (Phase("Assigning", 123), Phase("Reconciled", 200, ("m-2",), "note")),
        Outcome.STABLE, 3, (("load_ms", "12"),))
    key = HistoryKey("group", 3)
    raw_key, raw_value = serialize(key, event)
    assert int.from_bytes(raw_key[:2], "big") == codec.HISTORY_KEY_VERSION
    assert deserialize(raw_key, raw_value) == (key, event)
    assert deserialize(raw_key, None) == (key, None)
    # a later version may append fields: this one reads what it knows
    assert codec.decode_value(raw_value + b"\x00\x01") == event
    assert Cause.of("a-cause-from-the-future") is Cause.UNKNOWN
