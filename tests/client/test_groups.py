"""Groups of samsa consumers against the samsa broker's group coordinator."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from samsa import TopicPartition
from samsa.assignors import Assignment, Assignor, ClusterView, PartitionAssignor, Subscription
from samsa.client import Admin, FencedInstanceIdError, Producer
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.groups import all_tps, describe, make, split_ok, status
from tests.client.proxy import Close, FaultProxy
from tests.client.runner import Runner

pytestmark = pytest.mark.slow
_groups = itertools.count()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_members_join_leave_and_crash(broker: BrokerProcess, topic: Callable[[int], str],
                                      group: str, strategy: str,
                                      runners: list[Runner]) -> None:
    t = topic(6)
    parts = all_tps(t, 6)
    for i in range(3):
        r = Runner(make(broker, group, partition_assignment_strategy=[strategy]), [t])
        r.start()
        runners.append(r)
        wait_until(lambda n=i + 1: split_ok(runners[:n], parts) and all(
            len(r.assignment) == 6 // n for r in runners[:n]), describe=lambda: describe(runners))
    runners[0].stop()  # clean leave
    wait_until(lambda: split_ok(runners[1:], parts), describe=lambda: describe(runners[1:]))
    runners[1].crash()  # no LeaveGroup: the session timeout removes it
    wait_until(lambda: split_ok(runners[2:], parts), timeout=30,
               describe=lambda: describe(runners[1:]))
    assert runners[2].error is None


def test_cooperative_revokes_only_moved_partitions(broker: BrokerProcess,
                                                   topic: Callable[[int], str], group: str,
                                                   runners: list[Runner]) -> None:
    t = topic(6)
    parts = all_tps(t, 6)
    first = Runner(make(broker, group, partition_assignment_strategy=["cooperative-sticky"]),
                   [t])
    first.start()
    runners.append(first)
    wait_until(lambda: split_ok([first], parts))
    second = Runner(make(broker, group, partition_assignment_strategy=["cooperative-sticky"]),
                    [t])
    second.start()
    runners.append(second)
    wait_until(lambda: split_ok(runners, parts))
    revoked = [p for kind, p in first.listener.calls if kind == "revoked"]
    assert revoked, "the first member must give up partitions"
    moved = set().union(*revoked)
    assert moved == set(second.assignment)  # only what moved, never everything
    assert len(first.assignment) == 3 and first.assignment.isdisjoint(moved)
    assert "lost" not in first.listener.kinds()


class FirstTakesAll(PartitionAssignor):
    """A custom strategy: the member with the smallest id gets every partition."""

    name = "first-takes-all"

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> Mapping[str, Sequence[TopicPartition]]:
        first = min(subscriptions)
        return {first: [TopicPartition(t, p) for t, n in partitions_per_topic.items()
                        for p in range(n)]}


def test_custom_python_assignor(broker: BrokerProcess, topic: Callable[[int], str],
                                group: str, runners: list[Runner]) -> None:
    t = topic(3)
    parts = all_tps(t, 3)
    for _ in range(2):
        r = Runner(make(broker, group, partition_assignment_strategy=[FirstTakesAll()]), [t])
        r.start()
        runners.append(r)
    wait_until(lambda: split_ok(runners, parts))
    owner = min(runners, key=lambda r: r.consumer.member_id)
    assert owner.assignment == parts
    assert all(not r.assignment for r in runners if r is not owner)


def test_static_member_restart_keeps_partitions_without_rebalance(
        broker: BrokerProcess, topic: Callable[[int], str], group: str,
        runners: list[Runner]) -> None:
    t = topic(4)
    parts = all_tps(t, 4)
    a = Runner(make(broker, group, group_instance_id="a", session_timeout_ms=10000), [t])
    b = Runner(make(broker, group, group_instance_id="b", session_timeout_ms=10000), [t])
    runners += [a, b]
    a.start()
    b.start()
    wait_until(lambda: split_ok(runners, parts))
    before, generation = a.assignment, b.consumer.generation
    a.stop()  # static members do not send LeaveGroup
    a2 = Runner(make(broker, group, group_instance_id="a", session_timeout_ms=10000), [t])
    runners.append(a2)
    a2.start()
    wait_until(lambda: split_ok([a2, b], parts))
    assert a2.assignment == before
    assert b.consumer.generation == generation  # b never rebalanced


def test_duplicate_static_instance_is_fenced(broker: BrokerProcess,
                                             topic: Callable[[int], str], group: str,
                                             runners: list[Runner]) -> None:
    t = topic(2)
    old = Runner(make(broker, group, group_instance_id="same"), [t])
    runners.append(old)
    old.start()
    wait_until(lambda: old.stable())
    new = Runner(make(broker, group, group_instance_id="same"), [t])
    runners.append(new)
    new.start()
    wait_until(lambda: isinstance(old.error, FencedInstanceIdError), timeout=30)


def test_max_poll_interval_expiry_leaves_then_rejoins(broker: BrokerProcess,
                                                      topic: Callable[[int], str], group: str,
                                                      runners: list[Runner]) -> None:
    t = topic(4)
    parts = all_tps(t, 4)
    slow = Runner(make(broker, group, max_poll_interval_ms=1500), [t])
    other = Runner(make(broker, group), [t])
    runners += [slow, other]
    slow.start()
    other.start()
    wait_until(lambda: split_ok(runners, parts))
    slow.paused_polling.set()  # processing takes longer than max_poll_interval_ms
    wait_until(lambda: split_ok([other], parts), timeout=30)
    slow.paused_polling.clear()
    wait_until(lambda: split_ok(runners, parts), timeout=30)
    assert "lost" in slow.listener.kinds()


def test_pattern_subscription_picks_up_new_topic(broker: BrokerProcess, admin: Admin,
                                                 group: str, runners: list[Runner]) -> None:
    prefix = f"pat{next(_groups)}-"
    admin.create_topics({prefix + "a": 2})
    r = Runner(make(broker, group), pattern=prefix.replace("-", r"\-") + ".*")
    runners.append(r)
    r.start()
    wait_until(lambda: split_ok([r], all_tps(prefix + "a", 2)))
    admin.create_topics({prefix + "b": 1})
    wait_until(lambda: split_ok([r], all_tps(prefix + "a", 2) | all_tps(prefix + "b", 1)))


def test_added_partitions_trigger_rebalance(broker: BrokerProcess, admin: Admin,
                                            topic: Callable[[int], str], group: str,
                                            runners: list[Runner]) -> None:
    t = topic(2)
    r = Runner(make(broker, group), [t])
    runners.append(r)
    r.start()
    wait_until(lambda: split_ok([r], all_tps(t, 2)))
    admin.create_partitions({t: 4})
    wait_until(lambda: split_ok([r], all_tps(t, 4)))


def test_commits_resume_the_group_and_describe(broker: BrokerProcess, admin: Admin,
                                               topic: Callable[[int], str],
                                               group: str) -> None:
    t = topic(2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(40):
            p.send(t, value=b"%d" % i)
    c = make(broker, group, enable_auto_commit=False)
    c.subscribe([t])
    got: list[Any] = []
    while len(got) < 20:
        got += c.poll(500, max_records=20 - len(got))
    c.commit()
    tp0 = TopicPartition(t, 0)
    assert c.committed(tp0) == c.position(tp0)
    described = admin.describe_groups([group])[group]
    assert described.state == "Stable"
    assert set(described.members[0].assignment) == all_tps(t, 2)
    assert described.members[0].topics == (t,)
    c.close()
    with make(broker, group, enable_auto_commit=False) as c2:
        c2.subscribe([t])
        rest: list[Any] = []
        for _ in range(100):
            rest += c2.poll(200)
            if len(got) + len(rest) >= 40:
                break
    assert sorted(r.value for r in got + rest) == sorted(b"%d" % i for i in range(40))
    assert admin.list_groups().get(group) == "Empty"
    assert set(admin.list_consumer_group_offsets(group)) == all_tps(t, 2)
    admin.alter_consumer_group_offsets(group, {tp0: 0})
    assert admin.list_consumer_group_offsets(group)[tp0] == 0
    admin.delete_consumer_group_offsets(group, [tp0])
    assert tp0 not in admin.list_consumer_group_offsets(group)
    admin.delete_groups([group])
    assert group not in admin.list_groups()


def test_wakeup_during_group_poll(broker: BrokerProcess, topic: Callable[[int], str],
                                  group: str) -> None:
    import threading

    from samsa.client import WakeupError

    t = topic(1)
    with make(broker, group) as c:
        c.subscribe([t])
        c.poll(2000)
        threading.Timer(0.3, c.wakeup).start()
        with pytest.raises(WakeupError):
            c.poll(30_000)


def test_coordinator_connection_loss_keeps_membership(
        proxied: tuple[BrokerProcess, FaultProxy], group: str, runners: list[Runner]) -> None:
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"loss": 2})
    r = Runner(make(proc, group, bootstrap_servers=proxy.address), ["loss"])
    runners.append(r)
    r.start()
    wait_until(lambda: split_ok([r], all_tps("loss", 2)))
    generation = r.consumer.generation
    # Drop the coordinator connection five times, each with a heartbeat in flight.
    proxy.inject(ApiKey.HEARTBEAT, *[Close()] * 5)
    wait_until(lambda: proxy.pending(ApiKey.HEARTBEAT) == 0, describe=lambda: describe([r]))

    def recovered() -> bool:
        s = status(r.consumer)
        return s.coordinator is not None and s.since_heartbeat_ok_ms < 500 and r.stable()

    wait_until(recovered, describe=lambda: describe([r]))
    assert r.consumer.generation == generation  # no rebalance: same member, same generation
    assert r.assignment == all_tps("loss", 2)


def test_wakeup_during_a_parked_join_resumes_it(broker: BrokerProcess,
                                                topic: Callable[[int], str], group: str,
                                                runners: list[Runner]) -> None:
    import threading

    from samsa.client import WakeupError

    t = topic(2)
    slow = Runner(make(broker, group), [t])
    runners.append(slow)
    slow.start()
    wait_until(lambda: split_ok([slow], all_tps(t, 2)))
    slow.paused_polling.set()  # the member will not rejoin: the next join phase waits
    c = make(broker, group)
    try:
        c.subscribe([t])
        threading.Timer(1.0, c.wakeup).start()
        with pytest.raises(WakeupError):
            c.poll(20_000)  # parked in JoinGroup until the wakeup
        assert c.member_state == "REBALANCING"
        slow.paused_polling.clear()

        def settled() -> bool:
            mine, theirs = c.assignment(), set(slow.assignment)
            return (c.member_state == "STABLE" and slow.stable() and bool(mine) and
                    bool(theirs) and mine.isdisjoint(theirs) and mine | theirs == all_tps(t, 2))

        for _ in range(300):
            c.poll(100)
            if settled():
                break
        assert settled(), describe([slow])
    finally:
        c.close()


class Weighted(Assignor):
    """The design document's custom strategy with user data, through the plug-in
    interface: each member sends its weight as its subscription's user data; the leader
    deals the partitions, in member id order, in proportion to the weights, and tells each
    member its share in its assignment's user data."""

    name = "weighted"

    def __init__(self, weight: int) -> None:
        self.weight = weight
        self.told: list[tuple[bytes | None, int]] = []

    def user_data(self, topics: Sequence[str]) -> bytes | None:
        return b"weight=%d" % self.weight

    def assign(self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
               ) -> dict[str, Assignment]:
        weights = {m: int((s.user_data or b"weight=1").split(b"=")[1])
                   for m, s in subscriptions.items()}
        parts = sorted(TopicPartition(t, p) for t, n in cluster.partitions_per_topic.items()
                       for p in range(n))
        out: dict[str, Assignment] = {}
        start, members = 0, sorted(subscriptions)
        for k, member in enumerate(members):
            share = len(parts) - start if k == len(members) - 1 else \
                len(parts) * weights[member] // sum(weights.values())
            out[member] = Assignment(tuple(parts[start:start + share]),
                                     user_data=b"%d/%d" % (share, len(parts)))
            start += share
        return out

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.told.append((assignment.user_data, len(assignment.partitions)))


def test_custom_assignor_with_its_own_user_data(broker: BrokerProcess,
                                                topic: Callable[[int], str], group: str,
                                                runners: list[Runner]) -> None:
    """User data goes both ways over a real group: the members' weights reach the leader's
    ``assign``, the leader's shares reach each member's ``on_assignment``."""
    t = topic(8)
    light, heavy = Weighted(1), Weighted(3)
    for assignor in (light, heavy):
        r = Runner(make(broker, group, partition_assignment_strategy=[assignor]), [t])
        r.start()
        runners.append(r)
        wait_until(lambda: split_ok(runners, all_tps(t, 8)) and all(x.assignment
                                                                   for x in runners))
    first, second = sorted(runners, key=lambda r: r.consumer.member_id)
    first_share = 2 if first is runners[0] else 6  # runners[0] is the light one
    assert first.assignment == {TopicPartition(t, p) for p in range(first_share)}
    assert second.assignment == {TopicPartition(t, p) for p in range(first_share, 8)}
    wait_until(lambda: light.told[-1:] == [(b"2/8", 2)] and heavy.told[-1:] == [(b"6/8", 6)],
               describe=lambda: (light.told, heavy.told))


def test_eight_consumers_on_seven_partitions(broker: BrokerProcess,
                                             topic: Callable[[int], str], group: str) -> None:
    """The design document's figure over a real group: with the default range strategy
    the members, in member id order, get partitions 0..6; the last one gets nothing.
    One thread polls all eight (no poll waits for the others' joins)."""
    t = topic(7)
    consumers = [make(broker, group) for _ in range(8)]
    try:
        for c in consumers:
            c.subscribe([t])

        def settled() -> bool:
            for c in consumers:
                c.poll(10)
            return all(c.member_state == "STABLE" and not c.rejoin_pending
                       for c in consumers) and \
                sum(len(c.assignment()) for c in consumers) == 7 and \
                len({c.generation for c in consumers}) == 1

        wait_until(settled, timeout=60)
        ordered = sorted(consumers, key=lambda c: c.member_id)
        assert [c.assignment() for c in ordered] == \
            [{TopicPartition(t, p)} for p in range(7)] + [set()]
    finally:
        for c in consumers:
            c.close()
