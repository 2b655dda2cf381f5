"""The consumer's group driver on a fake clock and a fake network: its pauses, deadlines
and timeouts are on the injected clock, and the heartbeat thread never blocks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.errors import ErrorCode as E

from samsa import TopicPartition
from samsa.assignors import resolve_assignor
from samsa.client.errors import KafkaConnectionError, KafkaError
from samsa.client.group.classic_driver import ConsumerCoordinator
from samsa.client.group.classic_machine import MembershipConfig, MemberState
from samsa.client.subscription import SubscriptionState
from samsa.protocol.api_keys import ApiKey
from tests.client.fakeclock import FakeClock, FakeMetadata, FakeNet

CONFIG = MembershipConfig("g", session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
                          heartbeat_interval_ms=1_000, retry_backoff_ms=250)
TP = TopicPartition("t", 0)


def driver(clock: FakeClock, net: FakeNet, **kw: Any) -> ConsumerCoordinator:
    options: dict[str, Any] = {"client_id": "c", "auto_commit": False,
                               "auto_commit_interval_ms": 5000, "rack": None,
                               "wakeup_flag": lambda: False, "clock": clock, **kw}
    return ConsumerCoordinator(FakeMetadata(net), SubscriptionState("latest"),  # type: ignore[arg-type]
                               CONFIG, [resolve_assignor("range")], **options)


def found(net: FakeNet) -> None:
    net.responders[ApiKey.FIND_COORDINATOR] = lambda body: SimpleNamespace(
        coordinators=[SimpleNamespace(key="g", error_code=0, node_id=7, host="h", port=9)])


def stable(coord: ConsumerCoordinator, clock: FakeClock) -> None:
    """Drive the machine (as the join loop would) into STABLE in generation 1."""
    m, now = coord.member.machine, clock.now() * 1000
    m.coordinator_found(7, now)
    m.next_step(now)
    m.on_join_response(0, now, generation=1, member_id="m1", protocol="range",
                       leader_id="other")
    m.on_sync_response(0, now, 1, frozenset({TP}))
    assert m.state == MemberState.STABLE


def test_commit_retries_on_the_clock_until_the_deadline() -> None:
    clock, net = FakeClock(), FakeNet()
    net.responders[ApiKey.OFFSET_COMMIT] = lambda body: SimpleNamespace(topics=[
        SimpleNamespace(name="t", partitions=[SimpleNamespace(
            partition_index=0, error_code=ErrorCode.coordinator_load_in_progress)])])
    found(net)
    coord = driver(clock, net)
    start = clock.now()
    with pytest.raises(KafkaError) as info:
        coord.commit_sync({TP: 5}, 1.0)
    assert info.value.code == ErrorCode.coordinator_load_in_progress
    # One commit, then one more after each backoff of 250 ms, until the deadline.
    assert net.apis() == [ApiKey.FIND_COORDINATOR] + [ApiKey.OFFSET_COMMIT] * 5
    assert clock.pauses == [0.25] * 4 and clock.now() == start + 1.0


def test_coordinator_lookup_backs_off_on_the_clock() -> None:
    clock, net = FakeClock(), FakeNet()

    def refuse(body: Any) -> Any:
        raise KafkaConnectionError("refused")

    net.responders[ApiKey.FIND_COORDINATOR] = refuse
    coord = driver(clock, net)
    start = clock.now()
    assert not coord.ensure_coordinator(start + 1.0)
    assert clock.now() >= start + 1.0
    lookups = net.apis().count(ApiKey.FIND_COORDINATOR)
    assert 4 <= lookups <= 5  # one per retry_backoff_ms
    assert all(p <= 0.1 for p in clock.pauses)


def test_heartbeat_timeout_is_the_request_timeout_bounded_by_the_session() -> None:
    for request_timeout_ms, expected in ((3_000, 3_000), (30_000, 10_000)):
        clock, net = FakeClock(), FakeNet(request_timeout_ms)
        coord = driver(clock, net)
        stable(coord, clock)
        clock.advance(1.0)
        coord.heartbeat.run_once()
        (hb,) = net.sent
        assert (hb.api_key, hb.dest, hb.timeout_ms) == (ApiKey.HEARTBEAT, ("coordinator", 7),
                                                       expected)


def test_heartbeat_thread_does_not_wait_for_its_leave_group() -> None:
    """max_poll_interval_ms passed: the heartbeat thread sends LeaveGroup and goes on,
    even though the coordinator never answers it."""
    clock, net = FakeClock(), FakeNet()
    coord = driver(clock, net)
    stable(coord, clock)
    clock.advance(CONFIG.rebalance_timeout_ms / 1000 + 1)
    before = clock.now()
    coord.heartbeat.run_once()
    assert net.apis() == [ApiKey.LEAVE_GROUP]
    assert clock.now() == before and clock.pauses == []
    assert coord.member.machine.state == MemberState.UNJOINED


def test_leave_on_unsubscribe_waits_for_its_answer_on_the_clock() -> None:
    clock, net = FakeClock(), FakeNet()
    coord = driver(clock, net)
    coord.member.subs.subscribe(["t"], None, None)
    stable(coord, clock)
    coord.unsubscribe()
    assert net.apis() == [ApiKey.LEAVE_GROUP]
    assert clock.pauses == [5.0]  # LeaveGroup unanswered: the user thread waited 5 s


def join_answer(member_id: str = "m1", generation: int = 1, leader: str = "other",
                code: int = 0, protocol_type: str | None = "consumer",
                protocol: str | None = "range") -> SimpleNamespace:
    return SimpleNamespace(error_code=code, generation_id=generation, member_id=member_id,
                           protocol_type=protocol_type, protocol_name=protocol,
                           leader=leader, members=[], skip_assignment=False)


def sync_answer(partitions: list[int], code: int = 0, protocol_type: str | None = "consumer",
                protocol: str | None = "range") -> SimpleNamespace:
    from samsa.assignors import Assignment, encode_assignment

    raw = encode_assignment(Assignment(tuple(("t", p) for p in partitions)))
    return SimpleNamespace(error_code=code, protocol_type=protocol_type,
                           protocol_name=protocol, assignment=raw)


def subscribed(clock: FakeClock, net: FakeNet, **kw: Any) -> ConsumerCoordinator:
    """A subscribed member whose ``poll`` the test calls; the test runs the heartbeat
    rounds itself (``heartbeat.run_once``): a heartbeat thread would wait on the fake
    clock, and so move it."""
    found(net)
    coord = driver(clock, net, **kw)
    coord.member.subs.subscribe(["t"], None, None)
    coord.heartbeat.start = lambda: None  # type: ignore[method-assign]
    return coord


def pending(net: FakeNet, api: int) -> list[Any]:
    """The futures of the unanswered requests of ``api``, oldest first."""
    return [fut for s, (_, fut) in zip(net.sent, net.futures, strict=True)
            if s.api_key == api and not fut.done()]


def test_poll_does_not_wait_for_a_parked_join_and_resumes_it() -> None:
    """The coordinator parks the JoinGroup (a member has not rejoined): ``poll`` returns
    at once, the JoinGroup stays in flight, and later polls resume it (no second one),
    then the SyncGroup the same way."""
    clock, net = FakeClock(), FakeNet()
    coord = subscribed(clock, net)
    start = clock.now()
    assert not coord.poll(start + 5.0)
    assert net.apis() == [ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP]
    assert clock.now() == start  # it did not wait for the answer (nor for the deadline)
    for _ in range(3):
        clock.advance(1.0)
        assert not coord.poll(clock.now() + 5.0)
    assert net.apis() == [ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP]
    assert coord.state == "REBALANCING" and coord.join_loop.awaiting_answer
    (join,) = pending(net, ApiKey.JOIN_GROUP)
    join.success(join_answer())
    assert not coord.poll(clock.now() + 5.0)  # the SyncGroup is parked in turn
    assert net.apis()[-1] == ApiKey.SYNC_GROUP and coord.join_loop.awaiting_answer
    assert not coord.poll(clock.now() + 5.0)
    assert net.apis().count(ApiKey.SYNC_GROUP) == 1
    (sync,) = pending(net, ApiKey.SYNC_GROUP)
    sync.success(sync_answer([0]))
    assert coord.poll(clock.now() + 5.0)
    assert coord.state == "STABLE" and set(coord.member.subs.assignment) == {TP}
    assert clock.now() == start + 3.0  # no poll waited


def test_join_answer_wakes_the_poll() -> None:
    """The consumer's poll sleeps while the join is parked; the answer wakes it."""
    clock, net = FakeClock(), FakeNet()
    woken: list[int] = []
    coord = subscribed(clock, net, on_group_answer=lambda: woken.append(1))
    coord.poll(clock.now())
    (join,) = pending(net, ApiKey.JOIN_GROUP)
    assert not woken
    join.success(join_answer())
    assert woken == [1]


def test_a_parked_join_the_member_left_is_not_resumed() -> None:
    """The user stopped polling past max_poll_interval_ms while the join was parked: the
    member left that rebalance, so the next poll joins anew instead of waiting for the old
    answer."""
    clock, net = FakeClock(), FakeNet()
    coord = subscribed(clock, net)
    coord.poll(clock.now())
    clock.advance(CONFIG.rebalance_timeout_ms / 1000 + 1)
    coord.heartbeat.run_once()
    assert coord.state == "UNJOINED"
    coord.poll(clock.now())
    assert net.apis().count(ApiKey.JOIN_GROUP) == 2 and len(pending(net, ApiKey.JOIN_GROUP)) == 2
    first, second = pending(net, ApiKey.JOIN_GROUP)
    first.success(join_answer(member_id="old"))  # ignored: no longer awaited
    second.success(join_answer())
    coord.poll(clock.now())
    assert net.apis()[-1] == ApiKey.SYNC_GROUP and coord.member_id == "m1"


@pytest.mark.parametrize(("request_timeout_ms", "expected"), [(30_000, 65_000),
                                                              (90_000, 90_000)])
def test_join_group_timeout_is_the_rebalance_timeout_plus_five_seconds(
        request_timeout_ms: int, expected: int) -> None:
    """Kafka's JoinGroup timeout: max(request timeout, rebalance timeout + 5 s)."""
    clock, net = FakeClock(), FakeNet(request_timeout_ms)
    coord = subscribed(clock, net)
    coord.poll(clock.now())
    (join,) = [s for s in net.sent if s.api_key == ApiKey.JOIN_GROUP]
    assert join.timeout_ms == expected
    assert join.body["rebalance_timeout"] == CONFIG.rebalance_timeout_ms


def joined(clock: FakeClock, net: FakeNet, coord: ConsumerCoordinator, **answer: Any) -> None:
    """Answer the parked JoinGroup (as a follower unless told)."""
    coord.poll(clock.now())
    (join,) = pending(net, ApiKey.JOIN_GROUP)
    join.success(join_answer(**answer))


def test_sync_answer_for_another_protocol_raises_from_poll() -> None:
    clock, net = FakeClock(), FakeNet()
    coord = subscribed(clock, net)
    joined(clock, net, coord)
    coord.poll(clock.now())
    (sync,) = pending(net, ApiKey.SYNC_GROUP)
    sync.success(sync_answer([0], protocol="roundrobin"))
    with pytest.raises(KafkaError) as info:
        coord.poll(clock.now())
    assert info.value.code == ErrorCode.inconsistent_group_protocol
    assert not coord.member.subs.assignment
    with pytest.raises(KafkaError):  # and on every later poll
        coord.poll(clock.now())


def test_follower_told_of_an_assignor_it_lacks_raises_from_poll() -> None:
    clock, net = FakeClock(), FakeNet()
    coord = subscribed(clock, net)
    joined(clock, net, coord, protocol="sticky")  # this member offers only "range"
    with pytest.raises(KafkaError) as info:
        coord.poll(clock.now())
    assert info.value.code == ErrorCode.inconsistent_group_protocol
    assert "'sticky'" in str(info.value)
    assert ApiKey.SYNC_GROUP not in net.apis()


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        self.calls.append(("revoked", parts))

    def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        self.calls.append(("assigned", parts))


def test_assignment_outside_the_subscription_is_not_installed() -> None:
    """The leader assigned a topic this member does not subscribe to (its subscription
    changed meanwhile, or the leader's assignor is wrong): the member takes nothing, its
    listener hears nothing, its assignor is not told, and it rejoins."""
    clock, net = FakeClock(), FakeNet()
    coord = subscribed(clock, net)
    listener = Recording()
    coord.member.subs.listener = listener
    told: list[Any] = []
    coord.join_loop.assignors[0].on_assignment = lambda a, g: told.append(a)  # type: ignore[method-assign]
    joined(clock, net, coord)
    coord.poll(clock.now())
    (sync,) = pending(net, ApiKey.SYNC_GROUP)
    from samsa.assignors import Assignment, encode_assignment

    sync.success(SimpleNamespace(error_code=0, protocol_type="consumer", protocol_name="range",
                                 assignment=encode_assignment(Assignment((("t", 0),
                                                                          ("u", 0))))))
    assert not coord.poll(clock.now())  # it sent a new JoinGroup at once
    assert not coord.member.subs.assignment and listener.calls == [] and told == []
    assert coord.generation == 1 and net.apis().count(ApiKey.JOIN_GROUP) == 2
    assert coord.member.machine.history[-2].startswith("generation 1: assignment")


def test_auto_commit_timer_restarts_with_a_new_assignment() -> None:
    """Kafka resets the auto-commit deadline when an assignment arrives: the first
    auto-commit is one full interval after it, however long the rebalance took."""
    clock, net = FakeClock(), FakeNet()
    coord = subscribed(clock, net, auto_commit=True)
    joined(clock, net, coord)
    coord.poll(clock.now())
    clock.advance(4.0)  # the SyncGroup is parked for 4 s
    (sync,) = pending(net, ApiKey.SYNC_GROUP)
    sync.success(sync_answer([0]))
    assert coord.poll(clock.now())
    coord.member.subs.assignment[TP].position = 42
    clock.advance(4.9)  # 8.9 s after the timer started, 4.9 s after the assignment
    coord.poll(clock.now())
    assert ApiKey.OFFSET_COMMIT not in net.apis()
    clock.advance(0.1)
    coord.poll(clock.now())
    (commit,) = [s for s in net.sent if s.api_key == ApiKey.OFFSET_COMMIT]
    assert commit.body["generation_id_or_member_epoch"] == 1
    assert commit.body["topics"][0]["partitions"][0]["committed_offset"] == 42


def offset_fetch_answer(code: int = 0, partition_code: int = 0,
                        offset: int = 7) -> SimpleNamespace:
    return SimpleNamespace(error_code=code, topics=[SimpleNamespace(name="t", partitions=[
        SimpleNamespace(partition_index=0, error_code=partition_code, committed_offset=offset,
                        metadata="m")])])


def fetching(*answers: SimpleNamespace) -> tuple[FakeClock, FakeNet, ConsumerCoordinator]:
    """A member whose OffsetFetch requests get ``answers`` in turn (the last one again)."""
    clock, net = FakeClock(), FakeNet()
    found(net)
    queue = list(answers)
    net.responders[ApiKey.OFFSET_FETCH] = lambda body: queue.pop(0) if len(queue) > 1 \
        else queue[0]
    return clock, net, driver(clock, net)


def test_offset_fetch_retries_retriable_errors_then_answers() -> None:
    """OffsetFetch: COORDINATOR_LOAD_IN_PROGRESS waits a backoff, NOT_COORDINATOR finds the
    coordinator again, UNSTABLE_OFFSET_COMMIT (a transaction in flight) waits too."""
    clock, net, coord = fetching(offset_fetch_answer(E.coordinator_load_in_progress),
                                 offset_fetch_answer(E.not_coordinator),
                                 offset_fetch_answer(partition_code=E.unstable_offset_commit),
                                 offset_fetch_answer())
    got = coord.fetch_committed([TP], 10.0)
    assert got == {TP: (7, "m")}
    assert net.apis() == [ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_FETCH,
                          ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_FETCH]
    assert clock.pauses == [0.25, 0.25, 0.25]


def test_offset_fetch_gives_up_at_its_deadline() -> None:
    clock, net, coord = fetching(offset_fetch_answer(E.coordinator_load_in_progress))
    start = clock.now()
    with pytest.raises(KafkaError, match="did not complete"):
        coord.fetch_committed([TP], 1.0)
    assert clock.now() == start + 1.0
    assert net.apis().count(ApiKey.OFFSET_FETCH) == 5  # at once, then every 250 ms


def test_offset_fetch_error_that_is_not_retriable_is_raised() -> None:
    _, net, coord = fetching(offset_fetch_answer(E.group_authorization_failed))
    with pytest.raises(KafkaError) as info:
        coord.fetch_committed([TP], 10.0)
    assert info.value.code == E.group_authorization_failed
    assert net.apis().count(ApiKey.OFFSET_FETCH) == 1


def test_failed_lookup_refreshes_the_broker_list_before_the_next() -> None:
    """Kafka's ensureCoordinatorReady: a retriable FindCoordinator failure backs off and
    waits for a metadata update (the node asked may be gone) before asking again."""
    clock, net = FakeClock(), FakeNet()
    answers: list[Any] = [KafkaConnectionError("reset"), SimpleNamespace(coordinators=[
        SimpleNamespace(key="g", error_code=E.coordinator_not_available, node_id=-1,
                        host="", port=-1)]),
                          SimpleNamespace(coordinators=[SimpleNamespace(
                              key="g", error_code=0, node_id=7, host="h", port=9)])]

    def answer(body: Any) -> Any:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    net.responders[ApiKey.FIND_COORDINATOR] = answer
    coord = driver(clock, net)
    metadata = coord.member.metadata
    assert coord.ensure_coordinator(clock.now() + 5.0)
    assert net.apis() == [ApiKey.FIND_COORDINATOR] * 3
    assert metadata.refreshes == [frozenset(), frozenset()]  # type: ignore[attr-defined]
    assert coord.member.machine.coordinator == 7


@pytest.mark.parametrize("coordinators", [[], [("other", 3)]])
def test_lookup_answer_without_our_group_is_an_error(
        coordinators: list[tuple[str, int]]) -> None:
    clock, net = FakeClock(), FakeNet()
    net.responders[ApiKey.FIND_COORDINATOR] = lambda body: SimpleNamespace(coordinators=[
        SimpleNamespace(key=k, error_code=0, node_id=n, host="h", port=9)
        for k, n in coordinators])
    coord = driver(clock, net)
    with pytest.raises(KafkaError, match="no coordinator for group 'g'"):
        coord.ensure_coordinator(clock.now() + 5.0)
    assert coord.member.machine.coordinator is None


def test_poll_leaves_a_slow_offset_fetch_in_flight_and_takes_its_answer_later() -> None:
    """Kafka's pendingCommittedOffsetRequest: the poll's committed-offset lookup waits
    until the poll's deadline only; the next poll for the same partitions takes the
    answer of the same request."""
    clock, net = FakeClock(), FakeNet()
    found(net)
    coord = driver(clock, net)
    start = clock.now()
    assert coord.poll_committed([TP], start + 0.2) is None
    assert clock.now() == start + 0.2
    assert coord.poll_committed([TP], clock.now() + 0.2) is None
    assert net.apis() == [ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH]
    (fetch,) = pending(net, ApiKey.OFFSET_FETCH)
    fetch.success(offset_fetch_answer())
    assert coord.poll_committed([TP], clock.now()) == {TP: (7, "m")}
    assert net.apis().count(ApiKey.OFFSET_FETCH) == 1
    # Other partitions: a request of their own (the old one's answer is not for them).
    assert coord.poll_committed([TP, TopicPartition("t", 1)], clock.now()) is None
    assert net.apis().count(ApiKey.OFFSET_FETCH) == 2
