"""The consumer's group driver on a fake clock and a fake network: its pauses, deadlines
and timeouts are on the injected clock, and the heartbeat thread never blocks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.assignors import resolve_assignor
from samsa.client.coordinator import ConsumerCoordinator
from samsa.client.errors import KafkaConnectionError, KafkaError
from samsa.client.membership import MembershipConfig, MemberState
from samsa.client.subscription import SubscriptionState
from samsa.protocol.api_keys import ApiKey
from tests.client.fakeclock import FakeClock, FakeMetadata, FakeNet

CONFIG = MembershipConfig("g", session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
                          heartbeat_interval_ms=1_000, retry_backoff_ms=250)
TP = TopicPartition("t", 0)


def driver(clock: FakeClock, net: FakeNet, **kw: Any) -> ConsumerCoordinator:
    return ConsumerCoordinator(FakeMetadata(net), SubscriptionState("latest"),  # type: ignore[arg-type]
                               CONFIG, [resolve_assignor("range")], client_id="c",
                               auto_commit=False, auto_commit_interval_ms=5000, rack=None,
                               wakeup_flag=lambda: False, clock=clock, **kw)


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
