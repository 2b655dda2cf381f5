"""The heartbeat thread keeps a member's session while the application is not in poll()."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

import pytest

from samsa import TopicPartition
from samsa.assignors import PartitionAssignor, Subscription
from samsa.client import Admin, Consumer
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.groups import all_tps, describe, make, split_ok, status
from tests.client.proxy import Close, FaultProxy, Swallow
from tests.client.runner import Runner

pytestmark = pytest.mark.slow

SESSION_MS = 2000


def test_lost_coordinator_is_found_again_without_poll(
        proxied: tuple[BrokerProcess, FaultProxy], group: str) -> None:
    """A consumer busy with a long batch (no poll) loses its coordinator connection: the
    heartbeat thread finds the coordinator again and the member stays in the group."""
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"busy": 2})
        c = Consumer(bootstrap_servers=proxy.address, group_id=group,
                     session_timeout_ms=SESSION_MS, heartbeat_interval_ms=200,
                     max_poll_interval_ms=60_000, auto_offset_reset="earliest")
        try:
            c.subscribe(["busy"])
            for _ in range(100):
                c.poll(100)
                if c.member_state == "STABLE" and len(c.assignment()) == 2:
                    break
            member, generation = c.member_id, c.generation
            assert member and generation >= 0
            # The application now processes a long batch: no poll() from here on.
            proxy.inject(ApiKey.HEARTBEAT, Close())  # the coordinator connection drops
            wait_until(lambda: any("coordinator lost" in h for h in status(c).history))
            time.sleep(3 * SESSION_MS / 1000)
            g = admin.describe_groups([group])[group]
            after = status(c)
            assert (g.state, [m.member_id for m in g.members]) == ("Stable", [member]), \
                after.history[-6:]
            assert after.coordinator is not None
            assert after.since_heartbeat_ok_ms < SESSION_MS
            c.poll(100)  # back from the batch: same member, same generation, no rebalance
            assert (c.member_id, c.generation, c.member_state) == (member, generation, "STABLE")
            assert not c.rejoin_pending
        finally:
            c.close()


def test_unanswered_heartbeat_times_out_before_the_session(
        proxied: tuple[BrokerProcess, FaultProxy], group: str) -> None:
    """The coordinator never answers one heartbeat (a hung connection). The heartbeat's
    request timeout, shorter than the session, closes the connection; the member finds the
    coordinator again and heartbeats before its session expires: the group keeps it."""
    proc, proxy = proxied
    session_ms = 4000
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"hung": 1})
        c = Consumer(bootstrap_servers=proxy.address, group_id=group,
                     session_timeout_ms=session_ms, heartbeat_interval_ms=200,
                     request_timeout_ms=1000, max_poll_interval_ms=60_000)
        try:
            c.subscribe(["hung"])
            for _ in range(100):
                c.poll(100)
                if c.member_state == "STABLE" and c.assignment():
                    break
            member, generation = c.member_id, c.generation
            assert member and generation >= 0
            # No poll() from here on: only the heartbeat thread keeps the member alive.
            proxy.inject(ApiKey.HEARTBEAT, Swallow())
            wait_until(lambda: proxy.pending(ApiKey.HEARTBEAT) == 0)
            time.sleep(1.5 * session_ms / 1000)
            g = admin.describe_groups([group])[group]
            after = status(c)
            assert (g.state, [m.member_id for m in g.members]) == ("Stable", [member]), \
                after.history[-6:]
            assert after.coordinator is not None and after.since_heartbeat_ok_ms < session_ms
            c.poll(100)
            assert (c.member_id, c.generation, c.member_state) == (member, generation, "STABLE")
        finally:
            c.close()


class SlowLeader(PartitionAssignor):
    """Round-robin; the first assignment of two members takes ``pause`` seconds."""

    name = "slow-leader"

    def __init__(self, pause: float, counter: list[int]) -> None:
        self.pause = pause
        self.counter = counter
        self.lock = threading.Lock()

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> Mapping[str, Sequence[TopicPartition]]:
        members = sorted(subscriptions)
        if len(members) == 2:
            with self.lock:
                self.counter.append(1)
                slow = len(self.counter) == 1
            if slow:
                time.sleep(self.pause)
        tps = sorted(TopicPartition(t, p) for t, n in partitions_per_topic.items()
                     for p in range(n))
        return {m: tps[i::len(members)] for i, m in enumerate(members)}


def test_slow_assignor_does_not_cost_the_leader_its_session(
        broker: BrokerProcess, topic: Callable[[int], str], group: str,
        runners: list[Runner]) -> None:
    """The leader's assignment takes longer than the session timeout: both members keep
    heartbeating until the SyncGroup answer, so the generation completes as assigned."""
    t = topic(4)
    counter: list[int] = []

    def member() -> Runner:
        return Runner(make(broker, group, session_timeout_ms=SESSION_MS,
                           partition_assignment_strategy=[SlowLeader(2.5 * SESSION_MS / 1000,
                                                                     counter)]), [t])

    leader = member()
    runners.append(leader)
    leader.start()
    wait_until(lambda: split_ok([leader], all_tps(t, 4)))
    assert leader.consumer.generation == 1
    follower = member()
    runners.append(follower)
    follower.start()
    wait_until(lambda: split_ok(runners, all_tps(t, 4)), timeout=30,
               describe=lambda: describe(runners))
    assert len(counter) == 1, describe(runners)  # one assignment of the two: nobody evicted
    assert [r.consumer.generation for r in runners] == [2, 2]
    assert all(r.error is None and "lost" not in r.listener.kinds() for r in runners)
