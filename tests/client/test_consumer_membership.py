"""The KIP-848 member state machine (``ConsumerMembership``) on explicit millisecond times:
join, reconciliation (revoke before assign, acknowledgement), fencing, leaving, static
members, the poll timer, subscription changes and every heartbeat error path."""

from __future__ import annotations

import random
from uuid import UUID

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.group.actions import FindCoordinator, LosePartitions, RaiseError, RevokePartitions
from samsa.client.group.consumer_machine import (
    ConsumerMembership,
    ConsumerMembershipConfig,
    HeartbeatRequest,
    SendConsumerHeartbeat,
)
from samsa.client.group.epoch_machine import EpochState as CgState
from samsa.client.group.epoch_machine import Reconcile

E = ErrorCode
T = UUID(int=1)
U = UUID(int=2)
NAMES = {T: "t", U: "u"}
T0, T1, T2, T3 = (TopicPartition("t", i) for i in range(4))
INTERVAL = 500


def machine(instance: str | None = None, auto_commit: bool = True,
            assignor: str | None = "uniform", rack: str | None = "r1") -> ConsumerMembership:
    cfg = ConsumerMembershipConfig("g", member_id="me", group_instance_id=instance,
                                   rack_id=rack, rebalance_timeout_ms=60_000,
                                   server_assignor=assignor, retry_backoff_ms=100,
                                   retry_backoff_max_ms=1000)
    m = ConsumerMembership(cfg, auto_commit=auto_commit)
    m.poll(0)
    return m


def heartbeat(m: ConsumerMembership, now: float) -> HeartbeatRequest:
    actions = m.heartbeat_tick(now)
    assert len(actions) == 1 and isinstance(actions[0], SendConsumerHeartbeat), actions
    return actions[0].request


def answer(m: ConsumerMembership, req: HeartbeatRequest, now: float, epoch: int,
           assignment: dict[UUID, set[int]] | None = None, code: int = E.none) -> None:
    m.on_heartbeat_response(req, now, code, member_id="me", member_epoch=epoch,
                            heartbeat_interval_ms=INTERVAL, assignment=assignment)


def reconcile(m: ConsumerMembership, owned: set[TopicPartition], now: float) -> Reconcile:
    actions = m.user_step(now, NAMES, frozenset(owned))
    assert len(actions) == 1 and isinstance(actions[0], Reconcile), actions
    return actions[0]


def joined(m: ConsumerMembership, assignment: dict[UUID, set[int]], now: float = 0,
           epoch: int = 1) -> frozenset[TopicPartition]:
    """Subscribe, join, reconcile and acknowledge ``assignment``: STABLE."""
    m.subscribe({"t", "u"}, None)
    m.poll(now)
    assert m.heartbeat_tick(now) == [FindCoordinator()]
    m.coordinator_found(0, now)
    req = heartbeat(m, now)
    answer(m, req, now, epoch, assignment)
    plan = reconcile(m, set(), now)
    m.reconciled(plan, now)
    ack = heartbeat(m, now)
    answer(m, ack, now, epoch)
    assert m.state == CgState.STABLE
    return plan.assignment


# ---- join and reconciliation -----------------------------------------------------------------


def test_join_sends_every_field_then_only_changes() -> None:
    m = machine()
    assert m.state == CgState.UNSUBSCRIBED and m.heartbeat_tick(0) == []
    m.subscribe({"u", "t"}, None)
    assert m.state == CgState.UNSUBSCRIBED  # joins on the next poll, as Kafka's consumer
    m.poll(10)
    assert m.state == CgState.JOINING
    assert m.heartbeat_tick(10) == [FindCoordinator()]
    m.coordinator_found(3, 10)
    join = heartbeat(m, 10)
    assert join == HeartbeatRequest(
        member_id="me", member_epoch=0, instance_id=None, rack_id="r1",
        rebalance_timeout_ms=60_000, subscribed_topic_names=("t", "u"),
        subscribed_topic_regex=None, server_assignor="uniform", topic_partitions=())
    assert m.heartbeat_tick(11) == [], "one heartbeat in flight at a time"
    answer(m, join, 20, 1, {T: {0, 1}})
    assert m.state == CgState.RECONCILING and m.member_epoch == 1
    assert m.heartbeat_interval_ms == INTERVAL
    plan = reconcile(m, set(), 25)
    assert (plan.revoked, plan.added, plan.assignment) == (frozenset(), {T0, T1}, {T0, T1})
    assert plan.commit
    assert m.user_step(26, NAMES, frozenset()) == [], "one reconciliation at a time"
    m.reconciled(plan, 30)
    assert m.state == CgState.ACKNOWLEDGING
    ack = heartbeat(m, 30)  # at once, without waiting for the interval
    assert ack == HeartbeatRequest(member_id="me", member_epoch=1,
                                   topic_partitions=((T, (0, 1)),))
    assert m.state == CgState.STABLE
    answer(m, ack, 35, 1)
    assert m.heartbeat_tick(30 + INTERVAL - 1) == []
    plain = heartbeat(m, 30 + INTERVAL)
    assert plain == HeartbeatRequest(member_id="me", member_epoch=1)


def test_revoke_before_assign() -> None:
    m = machine()
    owned = joined(m, {T: {0, 1}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 2, {T: {1, 2}})
    plan = reconcile(m, set(owned), 1001)
    assert plan.revoked == {T0} and plan.added == {T2} and plan.assignment == {T1, T2}
    # Until the reconciliation is acknowledged the member still reports what it owned.
    assert m.state == CgState.RECONCILING
    m.reconciled(plan, 1002)
    ack = heartbeat(m, 1002)
    assert ack.topic_partitions == ((T, (1, 2)),)


def test_revocation_only_is_acknowledged_before_the_next_assignment() -> None:
    """The coordinator hands a partition on only after its owner acknowledged without it:
    the ack of a pure revocation carries the remaining partitions."""
    m = machine()
    owned = joined(m, {T: {0, 1, 2, 3}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 2, {T: {0, 1}})
    plan = reconcile(m, set(owned), 1000)
    assert plan.revoked == {T2, T3} and plan.added == frozenset()
    m.reconciled(plan, 1000)
    assert heartbeat(m, 1000).topic_partitions == ((T, (0, 1)),)


def test_a_new_target_during_reconciliation_is_reconciled_after_the_ack() -> None:
    m = machine()
    owned = joined(m, {T: {0, 1}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 2, {T: {0}})
    plan = reconcile(m, set(owned), 1000)
    req = heartbeat(m, 1000 + INTERVAL)
    answer(m, req, 1000 + INTERVAL, 3, {T: {0, 1}})  # back to the old assignment
    assert m.state == CgState.RECONCILING, "no STABLE before the running plan's ack"
    m.reconciled(plan, 1600)
    assert heartbeat(m, 1600).topic_partitions == ((T, (0,)),)
    assert m.state == CgState.RECONCILING
    again = reconcile(m, set(plan.assignment), 1601)
    assert again.added == {T1} and again.revoked == frozenset()


def test_unknown_topic_ids_wait_for_metadata() -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 2, {T: {0}, UUID(int=9): {0}})
    assert m.unresolved(NAMES) == {UUID(int=9)}
    # What resolves equals what is owned: acknowledged at once, the rest waits.
    assert m.user_step(1001, NAMES, frozenset(owned)) == []
    assert m.state == CgState.ACKNOWLEDGING
    assert heartbeat(m, 1001).topic_partitions == ((T, (0,)),)
    assert m.state == CgState.RECONCILING
    plan = m.user_step(1002, {**NAMES, UUID(int=9): "new"}, frozenset(owned))
    assert isinstance(plan[0], Reconcile)
    assert plan[0].added == {TopicPartition("new", 0)}


def test_a_listener_failure_leaves_the_member_reconciling() -> None:
    m = machine()
    owned = joined(m, {T: {0, 1}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 2, {T: {1}})
    plan = reconcile(m, set(owned), 1000)
    m.reconciled(plan, 1000, ok=False)
    assert m.state == CgState.RECONCILING
    assert heartbeat(m, 1000 + INTERVAL).topic_partitions is None, "no ack"
    assert reconcile(m, {T1}, 2000).revoked == frozenset(), "tried again from what is held"


# ---- fencing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [E.fenced_member_epoch, E.unknown_member_id])
def test_fenced_member_loses_its_partitions_and_rejoins_at_epoch_zero(code: int) -> None:
    m = machine()
    owned = joined(m, {T: {0, 1}}, epoch=4)
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 0, code=code)
    assert m.state == CgState.FENCED and m.member_epoch == 0
    assert m.heartbeat_tick(1001) == [], "no heartbeat until the partitions are released"
    assert m.commit_identity() == (-1, "")
    assert m.user_step(1002, NAMES, owned) == [LosePartitions(owned)]
    m.released(1003)
    assert m.state == CgState.JOINING
    rejoin = heartbeat(m, 1003)  # at once: no backoff after fencing
    assert rejoin.member_epoch == 0 and rejoin.member_id == "me"
    assert rejoin.subscribed_topic_names == ("t", "u") and rejoin.topic_partitions == ()
    assert rejoin.rebalance_timeout_ms == 60_000


def test_fenced_during_reconciliation_aborts_it() -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 2, {T: {0, 1}})
    plan = reconcile(m, set(owned), 1000)
    req = heartbeat(m, 1000 + INTERVAL)
    answer(m, req, 1500, 0, code=E.fenced_member_epoch)
    assert not m.reconcile_valid(plan)
    m.reconciled(plan, 1501)
    assert m.state == CgState.FENCED
    assert m.user_step(1502, NAMES, plan.assignment) == [LosePartitions(plan.assignment)]


def test_fenced_while_leaving_sends_no_leave() -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    assert m.prepare_leave(owned) == [RevokePartitions(owned)]
    answer(m, req, 1001, 0, code=E.unknown_member_id)
    assert m.state == CgState.UNSUBSCRIBED
    assert m.leave_request(1002) is None


# ---- leaving ---------------------------------------------------------------------------------


def test_leave_revokes_then_sends_epoch_minus_one() -> None:
    m = machine()
    owned = joined(m, {T: {0, 1}}, epoch=3)
    assert m.prepare_leave(owned) == [RevokePartitions(owned)]
    assert m.state == CgState.PREPARE_LEAVING
    leave = m.leave_request(10)
    assert leave is not None and leave.member_epoch == -1 and leave.member_id == "me"
    assert leave.topic_partitions is None
    assert m.state == CgState.UNSUBSCRIBED
    answer(m, leave, 11, -1)
    assert m.state == CgState.UNSUBSCRIBED and m.heartbeat_tick(12) == []
    assert m.commit_identity() == (-1, "")
    m.poll(13)
    assert m.state == CgState.UNSUBSCRIBED, "no rejoin without a new subscribe"


def test_static_member_leaves_with_epoch_minus_two() -> None:
    m = machine(instance="i-1")
    owned = joined(m, {T: {0}})
    assert heartbeat(m, 1000).instance_id == "i-1"
    m.prepare_leave(owned)
    leave = m.leave_request(1001)
    assert leave is not None and leave.member_epoch == -2 and leave.instance_id == "i-1"


def test_close_without_leaving() -> None:
    dynamic, static = machine(), machine(instance="i-1")
    joined(dynamic, {T: {0}})
    joined(static, {T: {0}})
    assert dynamic.static_leave_request(1) is None
    assert dynamic.state == CgState.STABLE
    leave = static.static_leave_request(1)
    assert leave is not None and leave.member_epoch == -2


def test_leave_of_a_fenced_member_sends_nothing() -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 0, code=E.fenced_member_epoch)
    assert m.prepare_leave(owned) == [LosePartitions(owned)]
    assert m.state == CgState.UNSUBSCRIBED and m.leave_request(1001) is None
    m.subscribe({"t"}, None)
    m.poll(1002)
    assert heartbeat(m, 1002).topic_partitions == (), "rejoins owning nothing"


def test_leave_without_partitions_or_coordinator() -> None:
    m = machine()
    joined(m, {})
    m.coordinator_dead("gone", 5)
    assert m.prepare_leave(frozenset()) == []
    assert m.leave_request(6) is None and m.state == CgState.UNSUBSCRIBED


def test_resubscribe_after_leaving_joins_again_with_the_same_member_id() -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    m.prepare_leave(owned)
    m.leave_request(10)
    m.subscribe({"t"}, None)
    m.poll(11)
    assert m.state == CgState.JOINING
    req = heartbeat(m, 11)
    assert (req.member_id, req.member_epoch, req.subscribed_topic_names) == ("me", 0, ("t",))


# ---- the poll timer --------------------------------------------------------------------------


def test_poll_timeout_leaves_then_rejoins_on_the_next_poll() -> None:
    m = machine()
    owned = joined(m, {T: {0, 1}})
    leave = heartbeat(m, 60_001)
    assert leave.member_epoch == -1
    assert m.state == CgState.STALE and m.heartbeat_tick(60_002) == []
    m.poll(70_000)
    assert m.user_step(70_000, NAMES, owned) == [LosePartitions(owned)]
    m.released(70_000)
    assert m.state == CgState.JOINING
    assert heartbeat(m, 70_000).member_epoch == 0


def test_poll_timeout_of_a_static_member_keeps_its_instance() -> None:
    m = machine(instance="i-1")
    joined(m, {T: {0}})
    assert heartbeat(m, 60_001).member_epoch == -2


# ---- subscriptions ---------------------------------------------------------------------------


def test_subscription_changes_ride_on_the_next_heartbeat() -> None:
    m = machine()
    joined(m, {T: {0}})
    m.subscribe({"t", "v"}, None)
    m.poll(100)
    assert m.state == CgState.STABLE
    req = heartbeat(m, INTERVAL)
    assert req.subscribed_topic_names == ("t", "v") and req.subscribed_topic_regex is None
    answer(m, req, INTERVAL, 1)
    m.subscribe(set(), "t.*")
    req = heartbeat(m, 2 * INTERVAL)
    assert req.subscribed_topic_regex == "t.*" and req.subscribed_topic_names == ()
    answer(m, req, 2 * INTERVAL, 1)
    m.subscribe({"t"}, None)
    req = heartbeat(m, 3 * INTERVAL)
    assert req.subscribed_topic_regex == "" and req.subscribed_topic_names == ("t",)


def test_regex_join() -> None:
    m = machine(assignor=None, rack=None)
    m.subscribe(set(), "^t-[0-9]+$")
    m.poll(0)
    m.coordinator_found(0, 0)
    req = heartbeat(m, 0)
    assert req.subscribed_topic_regex == "^t-[0-9]+$" and req.subscribed_topic_names == ()
    assert req.server_assignor is None and req.rack_id is None


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [E.not_coordinator, E.coordinator_not_available])
def test_coordinator_moved(code: int) -> None:
    m = machine()
    joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 0, code=code)
    assert m.coordinator is None and m.state == CgState.STABLE
    assert m.heartbeat_tick(1050) == [], "FindCoordinator after the retry backoff"
    assert m.heartbeat_tick(1100) == [FindCoordinator()]
    m.coordinator_found(1, 1100)
    full = heartbeat(m, 1100)
    assert full.subscribed_topic_names == ("t", "u") and full.topic_partitions == ((T, (0,)),)
    assert full.rebalance_timeout_ms == 60_000


def test_load_in_progress_backs_off_exponentially() -> None:
    m = machine()
    joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 0, code=E.coordinator_load_in_progress)
    assert m.heartbeat_tick(1099) == []
    req = heartbeat(m, 1100)
    assert req.topic_partitions == ((T, (0,)),), "a full heartbeat after an error"
    answer(m, req, 1100, 0, code=E.coordinator_load_in_progress)
    assert m.heartbeat_tick(1299) == []
    req = heartbeat(m, 1300)
    answer(m, req, 1300, 1)
    assert m.heartbeat_tick(1300 + INTERVAL - 1) == []
    assert m.failures == 0


def test_lost_connection_finds_the_coordinator_and_sends_a_full_heartbeat() -> None:
    m = machine()
    joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    m.on_heartbeat_failed(req, "disconnected", 1001)
    assert m.coordinator is None and not m.heartbeat_in_flight
    assert m.heartbeat_tick(1101) == [FindCoordinator()]
    m.coordinator_found(0, 1101)
    assert heartbeat(m, 1101).subscribed_topic_names == ("t", "u")


@pytest.mark.parametrize("code", [
    E.unreleased_instance_id, E.fenced_instance_id, E.unsupported_assignor,
    E.group_max_size_reached, E.invalid_regular_expression, E.invalid_request,
    E.unsupported_version, E.group_authorization_failed, E.unknown_server_error])
def test_fatal_errors(code: int) -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    answer(m, req, 1000, 0, code=code)
    assert m.state == CgState.FATAL and m.heartbeat_tick(2000) == []
    assert m.user_step(1001, NAMES, owned) == [LosePartitions(owned)]
    step = m.user_step(1002, NAMES, frozenset())
    assert len(step) == 1 and isinstance(step[0], RaiseError) and step[0].code == code


def test_topic_authorization_failed_is_raised_once_and_the_member_stays() -> None:
    """Kafka 4.x: a heartbeat's TOPIC_AUTHORIZATION_FAILED (a subscribed topic the member
    may not DESCRIBE) is raised by the next poll only; the member keeps its state and
    partitions, heartbeats again after the backoff and goes on once it is answered."""
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    m.on_heartbeat_response(req, 1000, E.topic_authorization_failed, message="no t")
    assert m.state == CgState.STABLE and m.fatal is None
    (err,) = m.user_step(1001, NAMES, owned)
    assert isinstance(err, RaiseError) and err.code == E.topic_authorization_failed
    assert "no t" in err.message
    assert m.user_step(1002, NAMES, owned) == []  # raised once
    assert m.heartbeat_tick(1050) == []  # backing off
    retry = heartbeat(m, 1200)
    assert retry.subscribed_topic_names == ("t", "u")  # a full heartbeat after an error
    answer(m, retry, 1200, 1)
    assert m.state == CgState.STABLE and m.user_step(1201, NAMES, owned) == []


def test_unsupported_version_says_what_to_do() -> None:
    m = machine()
    m.subscribe({"t"}, None)
    m.poll(0)
    m.coordinator_found(0, 0)
    req = heartbeat(m, 0)
    answer(m, req, 1, 0, code=E.unsupported_version)
    assert m.fatal is not None and "group_protocol='classic'" in m.fatal.message


def test_answers_to_leaves_and_after_leaving_change_nothing() -> None:
    m = machine()
    owned = joined(m, {T: {0}})
    req = heartbeat(m, 1000)
    m.prepare_leave(owned)
    m.leave_request(1001)
    answer(m, req, 1002, 5, {T: {0, 1}})
    assert m.state == CgState.UNSUBSCRIBED and m.member_epoch == -1


def test_commit_identity() -> None:
    m = machine()
    assert m.commit_identity() == (-1, "")
    joined(m, {T: {0}}, epoch=7)
    assert m.commit_identity() == (7, "me")


# ---- random event sequences ------------------------------------------------------------------


def test_random_event_sequences_keep_the_invariants() -> None:
    """Random answers, failures, polls, subscriptions and leaves: one heartbeat in flight,
    one reconciliation at a time, every ack lists what the member holds, leaves carry
    epoch -1, and a fenced member rejoins at epoch 0."""
    for seed in range(40):
        rnd = random.Random(seed)
        m = machine()
        owned: frozenset[TopicPartition] = frozenset()
        in_flight: list[HeartbeatRequest] = []
        now = 0.0
        for _ in range(300):
            now += rnd.choice([0, 10, 200, INTERVAL])
            event = rnd.random()
            if event < 0.1:
                m.subscribe({"t"}, None)
            if event < 0.6:
                m.poll(now)
                for action in m.user_step(now, NAMES, owned):
                    if isinstance(action, LosePartitions):
                        assert action.partitions == owned
                        owned = frozenset()
                        m.released(now)
                    elif isinstance(action, Reconcile):
                        assert m.reconciling == action.attempt
                        assert not (action.revoked & action.added)
                        if m.reconcile_valid(action):
                            owned = action.assignment
                        m.reconciled(action, now)
            for action in m.heartbeat_tick(now):
                if isinstance(action, FindCoordinator):
                    m.coordinator_found(0, now)
                else:
                    assert isinstance(action, SendConsumerHeartbeat)
                    req = action.request
                    if req.leaving:
                        assert req.member_epoch == -1
                        continue
                    assert not in_flight, "one heartbeat in flight"
                    if req.topic_partitions is not None and m.state != CgState.JOINING:
                        assert {TopicPartition(NAMES[t], p) for t, ps in req.topic_partitions
                                for p in ps} == owned
                    if m.state == CgState.JOINING:  # (until an assignment comes)
                        assert req.topic_partitions == ()
                        assert req.subscribed_topic_names is not None
                    in_flight.append(req)
            if in_flight and rnd.random() < 0.7:
                req = in_flight.pop()
                roll = rnd.random()
                if roll < 0.08:
                    m.on_heartbeat_failed(req, "lost", now)
                elif roll < 0.16:
                    answer(m, req, now, 0, code=rnd.choice(
                        [E.fenced_member_epoch, E.unknown_member_id, E.not_coordinator,
                         E.coordinator_load_in_progress]))
                else:
                    parts = set(rnd.sample(range(4), rnd.randint(0, 4)))
                    answer(m, req, now, rnd.randint(1, 9),
                           {T: parts} if rnd.random() < 0.5 else None)
            if rnd.random() < 0.02:
                for action in m.prepare_leave(owned):
                    assert isinstance(action, (LosePartitions, RevokePartitions))
                    assert action.partitions == owned
                owned = frozenset()
                m.leave_request(now)
                in_flight.clear()
            assert m.state != CgState.FATAL
