"""The ``consumer`` protocol's driver on a fake clock and a fake network: the heartbeat
thread's rounds send ConsumerGroupHeartbeat bodies built from the machine, answers reach
the machine, and the user's poll resolves topic ids, reconciles and calls the listener."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.group.consumer_driver import ConsumerProtocolCoordinator
from samsa.client.subscription import SubscriptionState
from samsa.protocol.api_keys import ApiKey
from tests.client.fakeclock import FakeClock, FakeMetadata, FakeNet
from tests.client.runner import Recorder

TID = UUID(int=42)
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class IdMetadata(FakeMetadata):
    """Metadata that knows one topic id."""

    def __init__(self, net: FakeNet) -> None:
        super().__init__(net)
        self.cluster = SimpleNamespace(topic_names={TID: "t"})
        self.refreshes = 0

    def refresh(self, topics: Any, timeout_s: float = 30.0) -> Any:
        self.refreshes += 1
        return self.cluster


def answer(code: int = 0, epoch: int = 1, parts: list[int] | None = None) -> Any:
    assignment = None if parts is None else SimpleNamespace(
        topic_partitions=[SimpleNamespace(topic_id=TID, partitions=parts)])
    return SimpleNamespace(error_code=code, error_message=None, member_id="",
                           member_epoch=epoch, heartbeat_interval=300, assignment=assignment)


def setup() -> tuple[ConsumerProtocolCoordinator, FakeNet, FakeClock, SubscriptionState,
                     Recorder, list[Any]]:
    clock, net = FakeClock(), FakeNet()
    net.responders[ApiKey.FIND_COORDINATOR] = lambda body: SimpleNamespace(
        coordinators=[SimpleNamespace(key="g", error_code=0, node_id=7, host="h", port=9)])
    answers: list[Any] = []
    net.responders[ApiKey.CONSUMER_GROUP_HEARTBEAT] = lambda body: answers.pop(0)
    subs = SubscriptionState("latest")
    listener = Recorder()
    subs.subscribe(["t"], None, listener)
    coord = ConsumerProtocolCoordinator(
        IdMetadata(net), subs, group_id="g", group_instance_id=None,  # type: ignore[arg-type]
        rebalance_timeout_ms=60_000, server_assignor="uniform", rack="r", retry_backoff_ms=100,
        client_id="c", auto_commit=False, auto_commit_interval_ms=5000,
        wakeup_flag=lambda: False, clock=clock, member_id="m-1")
    coord.request_rejoin("subscribed")
    return coord, net, clock, subs, listener, answers


def heartbeats(net: FakeNet) -> list[Any]:
    return [s.body for s in net.sent if s.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT]


def test_join_reconcile_and_acknowledge() -> None:
    coord, net, clock, subs, listener, answers = setup()
    coord.user_steps()  # nothing yet
    coord.member.machine.poll(clock.now() * 1000)  # what Consumer.poll does first
    coord.heartbeat.run_once()  # FindCoordinator, answered at once
    assert coord.coordinator_known and net.addresses[("coordinator", 7)] == ("h", 9)
    answers.append(answer(epoch=1, parts=[0, 1]))
    coord.heartbeat.run_once()
    join = heartbeats(net)[-1]
    assert join["member_id"] == "m-1" and join["member_epoch"] == 0
    assert join["subscribed_topic_names"] == ["t"] and join["topic_partitions"] == []
    assert join["rebalance_timeout"] == 60_000 and join["server_assignor"] == "uniform"
    assert join["rack_id"] == "r" and join["subscribed_topic_regex"] is None
    assert coord.state == "RECONCILING" and coord.generation == 1
    coord.user_steps()
    assert set(subs.assignment) == {T0, T1}
    assert listener.calls == [("assigned", frozenset({T0, T1}))]
    answers.append(answer(epoch=1))
    coord.heartbeat.run_once()  # the ack, at once
    ack = heartbeats(net)[-1]
    assert ack["topic_partitions"] == [{"topic_id": TID, "partitions": [0, 1]}]
    assert ack["subscribed_topic_names"] is None and ack["rebalance_timeout"] == -1
    assert coord.state == "STABLE"
    sent = len(heartbeats(net))
    coord.heartbeat.run_once()
    assert len(heartbeats(net)) == sent, "the next heartbeat waits for the interval"
    clock.advance(0.3)
    answers.append(answer(epoch=2, parts=[1]))
    coord.heartbeat.run_once()
    coord.user_steps()
    assert listener.calls[-2:] == [("revoked", frozenset({T0})), ("assigned", frozenset())]
    assert set(subs.assignment) == {T1}


def test_fencing_reports_lost_and_rejoins() -> None:
    coord, net, clock, subs, listener, answers = setup()
    coord.member.machine.poll(clock.now() * 1000)
    coord.heartbeat.run_once()
    answers.append(answer(epoch=3, parts=[0]))
    coord.heartbeat.run_once()
    coord.user_steps()
    answers.append(answer(code=ErrorCode.fenced_member_epoch, epoch=0))
    coord.heartbeat.run_once()  # the ack, fenced
    assert coord.state == "FENCED"
    coord.user_steps()
    assert listener.calls[-1] == ("lost", frozenset({T0})) and not subs.assignment
    assert coord.state == "JOINING"
    answers.append(answer(epoch=4, parts=[0]))
    coord.heartbeat.run_once()
    rejoin = heartbeats(net)[-1]
    assert rejoin["member_epoch"] == 0 and rejoin["member_id"] == "m-1"
    assert rejoin["subscribed_topic_names"] == ["t"] and rejoin["topic_partitions"] == []


def test_leave_on_unsubscribe() -> None:
    coord, net, clock, _, listener, answers = setup()
    coord.member.machine.poll(clock.now() * 1000)
    coord.heartbeat.run_once()
    answers.append(answer(epoch=3, parts=[0]))
    coord.heartbeat.run_once()
    coord.user_steps()
    answers.append(answer(epoch=-1))
    coord.unsubscribe()
    assert listener.calls[-1] == ("revoked", frozenset({T0}))
    leave = heartbeats(net)[-1]
    assert leave["member_epoch"] == -1 and leave["member_id"] == "m-1"
    assert coord.state == "UNSUBSCRIBED"
