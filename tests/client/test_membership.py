"""The membership state machine on a fake clock: joins, heartbeats and every error path."""

from __future__ import annotations

import random

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.group.actions import (
    FindCoordinator,
    LosePartitions,
    RaiseError,
    RevokePartitions,
)
from samsa.client.group.classic_machine import (
    AssignPartitions,
    CommitOffsets,
    JoinedMember,
    Membership,
    MembershipConfig,
    MemberState,
    PerformAssignment,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
)

E = ErrorCode
NONE, NOT_COORDINATOR, DISCONNECTED = E.none, E.not_coordinator, E.network_exception
COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION = E.coordinator_not_available, E.illegal_generation
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = E.unknown_member_id, E.rebalance_in_progress
MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = E.member_id_required, E.fenced_instance_id
LOAD_IN_PROGRESS = E.coordinator_load_in_progress
INCONSISTENT_PROTOCOL = E.inconsistent_group_protocol

A0, A1, A2 = (TopicPartition("t", i) for i in range(3))


def machine(cooperative: bool = False, instance: str | None = None,
            auto_commit: bool = True) -> Membership:
    cfg = MembershipConfig("g", group_instance_id=instance, session_timeout_ms=10_000,
                           rebalance_timeout_ms=60_000, heartbeat_interval_ms=1_000,
                           retry_backoff_ms=100, cooperative=cooperative)
    m = Membership(cfg, auto_commit=auto_commit)
    m.poll(0)
    return m


def stable(m: Membership, parts: frozenset[TopicPartition], now: float = 0,
           generation: int = 1) -> list[object]:
    """Drive ``m`` through a follower join into STABLE with ``parts``."""
    if m.coordinator is None:
        assert m.next_step(now) == [FindCoordinator()]
        m.coordinator_found(0, now)
    actions = m.next_step(now)
    assert isinstance(actions[-1], SendJoinGroup)
    assert m.state == MemberState.REBALANCING
    got = m.on_join_response(NONE, now, generation=generation, member_id="m1",
                             protocol="range", leader_id="other")
    assert got == [SendSyncGroup(generation, "m1", "range", ())]
    return actions + m.on_sync_response(NONE, now, generation, parts)


def test_first_join_with_member_id_required_then_leader_assignment() -> None:
    m = machine()
    assert m.state == MemberState.UNJOINED and m.needs_rejoin()
    assert m.next_step(0) == [FindCoordinator()]
    m.coordinator_found(0, 0)
    assert m.next_step(0) == [SendJoinGroup("", "initial join")]
    assert m.on_join_response(MEMBER_ID_REQUIRED, 1, member_id="c-123") == []
    assert m.state == MemberState.UNJOINED and m.member_id == "c-123"
    (join,) = m.next_step(1)
    assert join == SendJoinGroup("c-123", "member id required")
    members = (JoinedMember("c-123", None, b"meta"), JoinedMember("c-456", None, b"meta2"))
    actions = m.on_join_response(NONE, 2, generation=1, member_id="c-123", protocol="range",
                                 leader_id="c-123", members=members)
    assert actions == [PerformAssignment(1, "range", "c-123", members)]
    assert m.on_assignment_computed({"c-456": b"b", "c-123": b"a"}) == [
        SendSyncGroup(1, "c-123", "range", (("c-123", b"a"), ("c-456", b"b")))]
    actions = m.on_sync_response(NONE, 3, 1, frozenset({A0}))
    assert actions == [AssignPartitions(frozenset({A0}), frozenset({A0}))]
    assert m.state == MemberState.STABLE and not m.needs_rejoin()
    assert m.commit_identity() == (1, "c-123")


def test_heartbeats_on_interval_one_in_flight() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    assert m.heartbeat_tick(500) == []
    assert m.heartbeat_tick(1000) == [SendHeartbeat(1, "m1")]
    assert m.heartbeat_tick(2500) == []  # still in flight
    assert m.on_heartbeat_response(NONE, 2600, 1) == []
    assert m.heartbeat_tick(2600) == [SendHeartbeat(1, "m1")]


def test_eager_rebalance_commits_and_revokes_everything_first() -> None:
    m = machine()
    stable(m, frozenset({A0, A1}))
    m.heartbeat_tick(1000)
    m.on_heartbeat_response(REBALANCE_IN_PROGRESS, 1001, 1)
    assert m.needs_rejoin() and m.state == MemberState.STABLE
    actions = m.next_step(1002)
    assert actions == [CommitOffsets(1, "m1"), RevokePartitions(frozenset({A0, A1}))]
    # Commit and revocation run while the member is still in generation 1: its commits
    # carry that generation, and it keeps heartbeating meanwhile.
    assert m.state == MemberState.STABLE and m.commit_identity() == (1, "m1")
    assert m.heartbeat_tick(2000) == [SendHeartbeat(1, "m1")]
    assert m.next_step(1003) == [SendJoinGroup("m1", "group is rebalancing")]
    # From the JoinGroup on, commits fail fast (Kafka's generationIfStable): they would
    # queue behind a JoinGroup the coordinator parks, then find generation 1 gone.
    assert m.commit_identity() is None
    assert m.on_heartbeat_response(REBALANCE_IN_PROGRESS, 1003, 1) == []
    m.on_join_response(NONE, 1003, generation=2, member_id="m1", protocol="range",
                       leader_id="x")
    assert m.commit_identity() is None  # generation 2 takes no commits before SyncGroup
    assert m.on_sync_response(NONE, 1004, 2, frozenset({A1})) == [
        AssignPartitions(frozenset({A1}), frozenset({A1}))]
    assert not m.needs_rejoin() and m.commit_identity() == (2, "m1")


def test_cooperative_revokes_only_moved_partitions_then_rejoins() -> None:
    m = machine(cooperative=True)
    stable(m, frozenset({A0, A1}))
    m.request_rejoin("new member")
    assert m.next_step(5) == [CommitOffsets(1, "m1")]
    assert m.next_step(5) == [SendJoinGroup("m1", "new member")]
    m.on_join_response(NONE, 6, generation=2, member_id="m1", protocol="cooperative-sticky",
                       leader_id="x")
    actions = m.on_sync_response(NONE, 7, 2, frozenset({A0, A2}))
    assert actions == [RevokePartitions(frozenset({A1})),
                       AssignPartitions(frozenset({A2}), frozenset({A0, A2}))]
    assert m.needs_rejoin()  # second rebalance gives A1 to its new owner
    assert m.next_step(8) == [CommitOffsets(2, "m1")]
    assert m.next_step(8) == [SendJoinGroup("m1", "revoked partitions moved to other members")]
    m.on_join_response(NONE, 9, generation=3, member_id="m1", protocol="cooperative-sticky",
                       leader_id="x")
    assert m.on_sync_response(NONE, 10, 3, frozenset({A0, A2})) == [
        AssignPartitions(frozenset(), frozenset({A0, A2}))]
    assert not m.needs_rejoin()


def test_unknown_member_resets_id_and_loses_partitions() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    m.heartbeat_tick(1000)
    m.on_heartbeat_response(UNKNOWN_MEMBER_ID, 1001, 1)
    assert m.member_id == "" and m.generation == -1 and m.state == MemberState.UNJOINED
    assert m.commit_identity() == (-1, "")
    assert m.next_step(1002) == [LosePartitions(frozenset({A0}))]
    assert m.next_step(1002) == [SendJoinGroup("", "Heartbeat: unknown member id")]


def test_illegal_generation_keeps_member_id_and_rejoins() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    m.heartbeat_tick(1000)
    m.on_heartbeat_response(ILLEGAL_GENERATION, 1001, 1)
    assert m.member_id == "m1" and m.generation == -1
    assert m.next_step(1002) == [LosePartitions(frozenset({A0}))]
    assert m.next_step(1002) == [SendJoinGroup("m1", "Heartbeat: illegal generation")]


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, DISCONNECTED])
def test_coordinator_errors_rediscover_without_rejoining(code: int) -> None:
    m = machine()
    stable(m, frozenset({A0}))
    m.heartbeat_tick(1000)
    m.on_heartbeat_response(code, 1001, 1)
    assert m.coordinator is None and m.state == MemberState.STABLE and not m.needs_rejoin()
    assert m.heartbeat_tick(1050) == []  # retry backoff
    # The heartbeat thread looks the coordinator up itself: no poll() needed.
    assert m.heartbeat_tick(3000) == [FindCoordinator()]
    m.coordinator_lookup_failed(COORDINATOR_NOT_AVAILABLE, 3000)
    assert m.heartbeat_tick(3050) == []
    assert m.heartbeat_tick(3100) == [FindCoordinator()]
    assert m.state == MemberState.STABLE and m.fatal is None
    m.coordinator_found(0, 3000)
    assert m.heartbeat_tick(3000) == [SendHeartbeat(1, "m1")]


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, DISCONNECTED])
def test_coordinator_error_during_join_finds_coordinator_again(code: int) -> None:
    m = machine()
    m.coordinator_found(0, 0)
    m.next_step(0)
    assert m.on_join_response(code, 1) == []
    assert m.coordinator is None
    assert m.next_step(50) == []  # retry backoff
    assert m.next_step(200) == [FindCoordinator()]


def test_load_in_progress_backs_off_then_rejoins() -> None:
    m = machine()
    m.coordinator_found(0, 0)
    m.next_step(0)
    m.on_join_response(LOAD_IN_PROGRESS, 10)
    assert m.next_step(20) == []
    assert isinstance(m.next_step(200)[-1], SendJoinGroup)


def test_rebalance_in_progress_on_join_and_sync_rejoins_at_once() -> None:
    m = machine()
    m.coordinator_found(0, 0)
    m.next_step(0)
    m.on_join_response(REBALANCE_IN_PROGRESS, 1)
    assert isinstance(m.next_step(1)[-1], SendJoinGroup)
    m.on_join_response(NONE, 2, generation=4, member_id="m", protocol="range", leader_id="x")
    assert m.on_sync_response(REBALANCE_IN_PROGRESS, 3, 4) == []
    assert m.state == MemberState.UNJOINED
    assert isinstance(m.next_step(3)[-1], SendJoinGroup)


def test_fenced_instance_is_fatal() -> None:
    m = machine(instance="i-1")
    stable(m, frozenset({A0}))
    m.heartbeat_tick(1000)
    actions = m.on_heartbeat_response(FENCED_INSTANCE_ID, 1001, 1)
    assert actions == [RaiseError(FENCED_INSTANCE_ID, "Heartbeat failed with error 82")]
    assert m.next_step(2000) == actions


def test_other_join_errors_are_fatal() -> None:
    m = machine()
    m.coordinator_found(0, 0)
    m.next_step(0)
    (err,) = m.on_join_response(INCONSISTENT_PROTOCOL, 1)
    assert isinstance(err, RaiseError) and err.code == INCONSISTENT_PROTOCOL


def test_poll_timeout_leaves_group_and_next_join_loses_partitions() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    for t in range(1000, 60_001, 1000):
        m.on_heartbeat_response(NONE, t, 1)
        m.heartbeat_tick(t)
    assert m.state == MemberState.STABLE
    assert m.heartbeat_tick(60_001) == [SendLeaveGroup("m1", "consumer poll timeout has expired")]
    assert m.state == MemberState.UNJOINED and m.member_id == "" and m.needs_rejoin()
    m.poll(70_000)
    assert m.next_step(70_000) == [LosePartitions(frozenset({A0}))]
    assert m.next_step(70_000) == [SendJoinGroup("", "poll timeout expired")]


def test_static_member_poll_timeout_sends_no_leave() -> None:
    m = machine(instance="i-1")
    stable(m, frozenset({A0}))
    m.last_heartbeat_ok = 60_001
    assert m.heartbeat_tick(60_001) == []
    assert m.state == MemberState.UNJOINED
    assert m.leave("close") == []


def test_session_timeout_without_heartbeat_answers_marks_coordinator_dead() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    m.poll(10_001)
    assert m.heartbeat_tick(1000) == [SendHeartbeat(1, "m1")]
    m.heartbeat_in_flight = False  # answer never came; the request timed out silently
    assert m.heartbeat_tick(10_001) == []
    assert m.coordinator is None


def test_stale_responses_are_ignored() -> None:
    m = machine()
    stable(m, frozenset({A0}), generation=5)
    m.heartbeat_tick(1000)
    assert m.on_heartbeat_response(ILLEGAL_GENERATION, 1001, 4) == []
    assert m.generation == 5 and m.state == MemberState.STABLE
    assert m.on_sync_response(NONE, 1002, 5, frozenset({A1})) == []  # not rebalancing
    assert m.on_commit_error(UNKNOWN_MEMBER_ID, 1003, 4) == []
    assert m.member_id == "m1"


def test_commit_errors_trigger_rejoin() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    m.on_commit_error(REBALANCE_IN_PROGRESS, 10, 1)
    assert m.needs_rejoin() and m.generation == 1
    m.on_commit_error(ILLEGAL_GENERATION, 11, 1)
    assert m.generation == -1


def test_leave_dynamic_member() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    assert m.leave("close") == [SendLeaveGroup("m1", "close")]
    assert m.state == MemberState.UNJOINED and m.owned == frozenset()


def test_random_event_sequences_keep_invariants() -> None:
    rng = random.Random(1234)
    codes = [NONE, NONE, NONE, NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
             REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, LOAD_IN_PROGRESS, DISCONNECTED]
    for seed in range(50):
        rng.seed(seed)
        m = machine(cooperative=bool(seed % 2))
        now = 0.0
        owned: frozenset[TopicPartition] = frozenset()
        for _ in range(200):
            now += rng.choice([1, 50, 500, 2000])
            m.poll(now)
            for a in m.next_step(now) + m.heartbeat_tick(now):
                if isinstance(a, FindCoordinator):
                    m.coordinator_found(0, now)
                elif isinstance(a, SendJoinGroup):
                    code = rng.choice(codes)
                    leader = rng.random() < 0.5
                    out = m.on_join_response(code, now, generation=rng.randint(1, 9),
                                             member_id="m", protocol="p",
                                             leader_id="m" if leader else "x")
                    for b in out:
                        if isinstance(b, PerformAssignment):
                            out = m.on_assignment_computed({"m": b""})
                    if out and isinstance(out[0], SendSyncGroup):
                        parts = frozenset(rng.sample([A0, A1, A2], rng.randint(0, 3)))
                        for b in m.on_sync_response(rng.choice(codes), now, m.generation,
                                                    parts):
                            if isinstance(b, AssignPartitions):
                                owned = b.assignment
                elif isinstance(a, SendHeartbeat):
                    m.on_heartbeat_response(rng.choice(codes), now, a.generation)
                elif isinstance(a, RevokePartitions | LosePartitions):
                    owned -= a.partitions
            if m.state == MemberState.STABLE:
                assert m.generation >= 0 and m.member_id
                assert m.owned == owned
            if m.state != MemberState.REBALANCING:
                assert m.generation >= 0 or m.state == MemberState.UNJOINED


ALL_CODES = [NONE, 7, DISCONNECTED, LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
             NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
             MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID, INCONSISTENT_PROTOCOL, 26]


def _in_state(name: str) -> Membership:
    m = machine()
    if name == "unjoined":
        m.coordinator_found(0, 0)
    elif name == "joining":
        m.coordinator_found(0, 0)
        m.next_step(0)
    elif name == "syncing":
        m.coordinator_found(0, 0)
        m.next_step(0)
        m.on_join_response(NONE, 0, generation=1, member_id="m1", protocol="range",
                           leader_id="x")
    elif name == "assigning":
        m.coordinator_found(0, 0)
        m.next_step(0)
        m.on_join_response(NONE, 0, generation=1, member_id="m1", protocol="range",
                           leader_id="m1")
    else:
        stable(m, frozenset({A0}))
    return m


@pytest.mark.parametrize("state", ["unjoined", "joining", "assigning", "syncing", "stable"])
@pytest.mark.parametrize("code", ALL_CODES)
@pytest.mark.parametrize("event", ["join", "sync", "heartbeat", "commit"])
def test_every_state_and_answer(state: str, code: int, event: str) -> None:
    """Each (state, response, error) pair: no exception, and the member can always recover."""
    m = _in_state(state)
    generation = m.generation
    if event == "join":
        out = m.on_join_response(code, 10, generation=2, member_id="m1", protocol="range",
                                 leader_id="x")
    elif event == "sync":
        out = m.on_sync_response(code, 10, generation, frozenset({A1}))
    elif event == "heartbeat":
        out = m.on_heartbeat_response(code, 10, generation)
    else:
        out = m.on_commit_error(code, 10, generation) if code else []
    fatal = [a for a in out if isinstance(a, RaiseError)]
    if fatal:
        assert m.next_step(10_000) == fatal  # fatal errors stick until the user sees them
        return
    if m.state == MemberState.STABLE:
        assert m.generation >= 0 and m.member_id
    # Recovery: answer every request with NONE; the member gets back to STABLE.
    now = 1000.0
    if m.awaiting == "assignment":
        m.on_assignment_computed({"m1": b""})
    if m.awaiting == "join":
        m.on_join_response(NONE, now, generation=7, member_id="m1", protocol="range",
                           leader_id="x")
    if m.awaiting == "sync":
        m.on_sync_response(NONE, now, m.generation, frozenset({A0}))
    for _ in range(5):
        now += 1000
        m.poll(now)
        for a in m.next_step(now):
            if isinstance(a, FindCoordinator):
                m.coordinator_found(0, now)
            elif isinstance(a, SendJoinGroup):
                (sync,) = m.on_join_response(NONE, now, generation=m.generation + 9,
                                             member_id="m1", protocol="range", leader_id="x")
                assert isinstance(sync, SendSyncGroup)
                m.on_sync_response(NONE, now, sync.generation, frozenset({A0}))
        if m.state == MemberState.STABLE and not m.needs_rejoin():
            break
    assert m.state == MemberState.STABLE and not m.needs_rejoin(), m.history[-5:]


def test_static_leader_skips_assignment_when_told() -> None:
    m = machine(instance="i-1")
    m.coordinator_found(0, 0)
    m.next_step(0)
    actions = m.on_join_response(NONE, 1, generation=3, member_id="m9", protocol="range",
                                 leader_id="m9", skip_assignment=True)
    assert actions == [SendSyncGroup(3, "m9", "range", ())]


def _leader_assigning(m: Membership, generation: int = 2) -> None:
    m.coordinator_found(0, 0)
    m.next_step(0)
    (perform,) = m.on_join_response(NONE, 100, generation=generation, member_id="m1",
                                    protocol="range", leader_id="m1")
    assert isinstance(perform, PerformAssignment)


def test_leader_heartbeats_while_it_assigns_then_stops_for_the_sync() -> None:
    m = machine()
    _leader_assigning(m)
    assert m.commit_identity() is None
    assert m.heartbeat_tick(1100) == [SendHeartbeat(2, "m1")]
    assert m.on_heartbeat_response(REBALANCE_IN_PROGRESS, 1101, 2) == []  # SyncGroup decides
    assert m.on_heartbeat_response(NONE, 1102, 2) == []
    # A slow assignor: the session stays alive, the member stays in the rebalance.
    for t in range(2100, 30_000, 1000):
        assert m.heartbeat_tick(t) == [SendHeartbeat(2, "m1")]
        m.on_heartbeat_response(NONE, t + 1, 2)
    assert m.state == MemberState.REBALANCING and not m.rejoin_needed
    (sync,) = m.on_assignment_computed({"m1": b"a"})
    assert sync == SendSyncGroup(2, "m1", "range", (("m1", b"a"),))
    assert m.heartbeat_tick(40_000) == []  # parked in SyncGroup: the coordinator spares it
    assert m.on_sync_response(NONE, 40_001, 2, frozenset({A0})) == [
        AssignPartitions(frozenset({A0}), frozenset({A0}))]
    assert m.heartbeat_tick(41_001) == [SendHeartbeat(2, "m1")]


def test_follower_does_not_heartbeat_behind_its_sync() -> None:
    m = _in_state("syncing")
    assert m.heartbeat_tick(5_000) == [] and m.heartbeat_tick(50_000) == []
    assert m.coordinator == 0  # and the session check does not drop the coordinator


def test_leader_finds_a_lost_coordinator_while_assigning() -> None:
    m = machine()
    _leader_assigning(m)
    m.heartbeat_tick(1100)
    m.on_heartbeat_response(NOT_COORDINATOR, 1101, 2)
    assert m.coordinator is None and m.awaiting == "assignment"
    assert m.heartbeat_tick(1300) == [FindCoordinator()]
    m.coordinator_found(0, 1300)
    assert m.heartbeat_tick(2200) == [SendHeartbeat(2, "m1")]


def test_assignment_after_the_generation_ended_is_dropped() -> None:
    m = machine()
    _leader_assigning(m)
    m.heartbeat_tick(1100)
    m.on_heartbeat_response(UNKNOWN_MEMBER_ID, 1101, 2)
    assert m.state == MemberState.UNJOINED
    assert m.on_assignment_computed({"m1": b"a"}) == []
    assert m.next_step(1200) == [SendJoinGroup("", "Heartbeat: unknown member id")]


def test_answers_to_older_requests_do_not_reset_a_join_in_flight() -> None:
    m = machine()
    stable(m, frozenset({A0}))
    m.request_rejoin("metadata changed")
    assert m.next_step(10) == [CommitOffsets(1, "m1"), RevokePartitions(frozenset({A0}))]
    assert m.next_step(11) == [SendJoinGroup("m1", "metadata changed")]
    # A heartbeat and a commit sent in generation 1 are answered while JoinGroup waits.
    assert m.on_heartbeat_response(UNKNOWN_MEMBER_ID, 12, 1) == []
    assert m.on_commit_error(ILLEGAL_GENERATION, 13, 1) == []
    assert m.state == MemberState.REBALANCING and m.member_id == "m1"
    assert m.on_join_response(NONE, 14, generation=2, member_id="m1", protocol="range",
                              leader_id="x") == [SendSyncGroup(2, "m1", "range", ())]


def test_static_member_keeps_its_identity_for_the_commit_before_rejoining() -> None:
    m = machine(instance="i-1")
    stable(m, frozenset({A0, A1}), generation=4)
    m.heartbeat_tick(1000)
    m.on_heartbeat_response(REBALANCE_IN_PROGRESS, 1001, 4)
    assert m.next_step(1002)[0] == CommitOffsets(4, "m1")
    assert m.commit_identity() == (4, "m1")


# ---- a JoinGroup/SyncGroup left in flight by a poll, resumed by a later one ---------------


def test_a_join_in_flight_is_awaited_until_its_answer_or_the_member_leaves() -> None:
    m = machine()
    m.coordinator_found(0, 0)
    (join,) = m.next_step(0)
    assert isinstance(join, SendJoinGroup) and m.awaits(join)
    # Polls come and go while the coordinator parks the JoinGroup: nothing new to send.
    for now in range(100, 5000, 100):
        m.poll(now)
        assert m.next_step(now) == [] and m.awaits(join)
        assert m.heartbeat_tick(now) == []  # no heartbeat behind a parked JoinGroup
    (sync,) = m.on_join_response(NONE, 5000, generation=1, member_id="m1", protocol="range",
                                 leader_id="x")
    assert isinstance(sync, SendSyncGroup)
    assert not m.awaits(join) and m.awaits(sync)
    m.on_sync_response(NONE, 5100, 1, frozenset({A0}))
    assert not m.awaits(sync)


def test_a_parked_join_is_no_longer_awaited_after_the_poll_timeout() -> None:
    """The user stopped polling for max_poll_interval_ms with a JoinGroup parked: the
    member left that rebalance; its next join is a new request."""
    m = machine()
    stable(m, frozenset({A0}))
    m.request_rejoin("new member")
    m.next_step(10)
    (join,) = m.next_step(10)
    assert m.awaits(join)
    m.heartbeat_tick(10 + 60_001)
    assert m.state == MemberState.UNJOINED and not m.awaits(join)
    assert m.next_step(60_100) == [SendJoinGroup("", "poll timeout expired")]
    assert not m.awaits(join)  # the old answer would be for another member id


def test_a_sync_of_an_older_generation_is_not_awaited() -> None:
    m = _in_state("syncing")
    sync = SendSyncGroup(m.generation, m.member_id, "range", ())
    assert m.awaits(sync)
    assert not m.awaits(SendSyncGroup(m.generation - 1, m.member_id, "range", ()))


# ---- answers checked against what the member asked for (Java's ConsumerCoordinator) -------


def _joining(m: Membership) -> None:
    m.coordinator_found(0, 0)
    m.next_step(0)


def test_join_answer_with_another_protocol_type_is_inconsistent() -> None:
    m = machine()
    _joining(m)
    (err,) = m.on_join_response(NONE, 1, generation=1, member_id="m1", protocol="range",
                                leader_id="x", protocol_type="connect")
    assert isinstance(err, RaiseError) and err.code == INCONSISTENT_PROTOCOL
    assert "'connect'" in err.message and m.next_step(2) == [err]
    # Older versions carry no protocol type: not checked.
    m = machine()
    _joining(m)
    assert m.on_join_response(NONE, 1, generation=1, member_id="m1", protocol="range",
                              leader_id="x", protocol_type=None) == [
        SendSyncGroup(1, "m1", "range", ())]


@pytest.mark.parametrize("leader", [True, False])
def test_join_answer_choosing_an_assignor_the_member_lacks_is_fatal(leader: bool) -> None:
    """Kafka's consumer: "Coordinator selected invalid assignment protocol"."""
    cfg = MembershipConfig("g", assignors=("range", "cooperative-sticky"))
    m = Membership(cfg)
    _joining(m)
    (err,) = m.on_join_response(NONE, 1, generation=1, member_id="m1", protocol="custom",
                                leader_id="m1" if leader else "x", protocol_type="consumer")
    assert isinstance(err, RaiseError) and err.code == INCONSISTENT_PROTOCOL
    assert "'custom'" in err.message and m.state == MemberState.UNJOINED


@pytest.mark.parametrize(("ptype", "pname"), [("connect", "range"), ("consumer", "roundrobin")])
def test_sync_answer_for_another_protocol_is_inconsistent(ptype: str, pname: str) -> None:
    m = machine()
    _joining(m)
    m.on_join_response(NONE, 1, generation=1, member_id="m1", protocol="range", leader_id="x")
    (err,) = m.on_sync_response(NONE, 2, 1, frozenset({A0}), protocol_type=ptype,
                                protocol=pname)
    assert isinstance(err, RaiseError) and err.code == INCONSISTENT_PROTOCOL
    assert m.owned == frozenset() and m.next_step(3) == [err]


def test_sync_answer_naming_the_join_protocol_is_taken() -> None:
    m = machine()
    _joining(m)
    m.on_join_response(NONE, 1, generation=1, member_id="m1", protocol="range", leader_id="x")
    assert m.on_sync_response(NONE, 2, 1, frozenset({A0}), protocol_type="consumer",
                              protocol="range") == [
        AssignPartitions(frozenset({A0}), frozenset({A0}))]


@pytest.mark.parametrize("cooperative", [False, True])
def test_assignment_outside_the_subscription_is_not_taken(cooperative: bool) -> None:
    """The subscription changed while the member joined: it stays in the generation with
    what it owned, takes nothing, and rejoins (commit first) with its subscription."""
    m = machine(cooperative=cooperative)
    stable(m, frozenset({A0}))
    m.request_rejoin("subscription changed")
    m.next_step(10)
    m.next_step(10)
    m.on_join_response(NONE, 11, generation=2, member_id="m1", protocol="range",
                       leader_id="x")
    owned = frozenset({A0}) if cooperative else frozenset()
    assert m.on_sync_response(NONE, 12, 2, frozenset({A0, A1}), subscribed=False) == []
    assert m.state == MemberState.STABLE and m.generation == 2 and m.owned == owned
    assert m.needs_rejoin() and m.heartbeating()
    assert m.next_step(13) == [CommitOffsets(2, "m1")]
    assert m.next_step(13) == [SendJoinGroup("m1", "the assignment does not match the "
                                                   "subscription")]


def test_cooperative_member_revokes_unsubscribed_partitions_before_it_joins() -> None:
    """Kafka's onJoinPrepare: a cooperative member keeps what it owns while it rejoins,
    except the partitions of topics it no longer subscribes to."""
    m = machine(cooperative=True)
    u0 = TopicPartition("u", 0)
    stable(m, frozenset({A0, u0}))
    m.request_rejoin("subscription changed")
    assert m.next_step(10, unsubscribed=frozenset({u0, TopicPartition("u", 9)})) == [
        CommitOffsets(1, "m1"), RevokePartitions(frozenset({u0}))]
    assert m.owned == frozenset({A0})


def test_heartbeat_interval_must_be_below_the_session_timeout() -> None:
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        MembershipConfig("g", session_timeout_ms=3000, heartbeat_interval_ms=3000)
    MembershipConfig("g", session_timeout_ms=3000, heartbeat_interval_ms=2999)
