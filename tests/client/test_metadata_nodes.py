"""Which node a metadata refresh asks, on a fake clock and network: nodes that fail or hang
are ranked last, and one node that never answers does not take the whole refresh."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from samsa import TopicPartition
from samsa.client.errors import KafkaConnectionError, KafkaTimeoutError
from samsa.client.future import Future
from samsa.client.metadata import Cluster, Metadata
from samsa.protocol.api_keys import ApiKey
from tests.client.fakeclock import FakeClock, FakeNet, Sent
from tests.client.test_clock_edges import metadata_answer, refused

A, B, C = ("bootstrap", 0), ("bootstrap", 1), ("bootstrap", 2)
TP = TopicPartition("t", 0)


class HungNet(FakeNet):
    """A :class:`FakeNet` whose requests to the ``hung`` nodes are never answered."""

    def __init__(self, hung: set[Any], request_timeout_ms: int) -> None:
        super().__init__(request_timeout_ms)
        self.hung = hung
        self.refusing: set[Any] = set()

    def send(self, dest: Any, api_key: int, body: Mapping[str, Any], *,
             timeout_ms: float | None = None, expect_response: bool = True) -> Future[Any]:
        if dest not in self.hung and dest not in self.refusing:
            return super().send(dest, api_key, body, timeout_ms=timeout_ms)
        self.sent.append(Sent(dest, api_key, body, timeout_ms))
        fut: Future[Any] = Future()
        self.futures.append((dest, fut))
        if dest in self.refusing:
            fut.failure(KafkaConnectionError("connection refused"))
        return fut

    def dests(self) -> list[Any]:
        return [s.dest for s in self.sent if s.api_key == ApiKey.METADATA]


def setup(hung: set[Any], request_timeout_ms: int = 30000,
          bootstrap: str = "a:1,b:2,c:3") -> tuple[Metadata, HungNet, FakeClock]:
    net, clock = HungNet(hung, request_timeout_ms), FakeClock()
    net.responders[ApiKey.METADATA] = metadata_answer  # node 1 at h:9092
    return Metadata(net, bootstrap, clock=clock), net, clock  # type: ignore[arg-type]


@pytest.mark.parametrize(("request_timeout_ms", "timeout_s", "patience"), [
    (30000, 10.0, 5.0),  # half the refresh's deadline
    (4000, 4.0, 2.0),  # the Spark reader: its deadline is the request timeout
    (2000, 30.0, 2.0),  # the request timeout, when shorter
])
def test_a_hung_node_is_left_for_the_next_before_the_deadline(
        request_timeout_ms: int, timeout_s: float, patience: float) -> None:
    metadata, net, clock = setup({A}, request_timeout_ms, "a:1,b:2")
    net.failures[B] = 1.0  # b failed once, a never did: the hung a is asked first
    start = clock.now()
    assert metadata.refresh(["t"], timeout_s).leader(TP) == 1
    assert net.dests() == [A, B]
    assert clock.now() - start == clock.pauses[0] == patience
    assert len(clock.pauses) == 1
    # a's request stays in flight for a late answer; the next refresh skips a
    assert net.in_flight(A) == 1
    assert metadata.refresh(["t"], timeout_s).leader(TP) == 1
    assert net.dests()[2:] == [1] and len(clock.pauses) == 1


def test_a_node_with_a_request_in_flight_is_asked_last() -> None:
    metadata, net, clock = setup({A})
    net.send(A, ApiKey.FETCH, {})  # stuck on the hung node
    for _ in range(20):
        metadata.cluster = Cluster()
        metadata.refresh(["t"], 10.0)
    assert A not in net.dests() and len(net.dests()) == 20
    assert clock.pauses == []


def test_nodes_are_asked_least_recently_failed_first() -> None:
    metadata, net, clock = setup(set())
    net.responders[ApiKey.METADATA] = refused
    net.failures.update({A: 5.0, B: 3.0})
    with pytest.raises(KafkaTimeoutError, match="connection refused"):
        metadata.refresh(["t"], 1.0)
    assert net.dests()[:6] == [C, B, A, C, B, A]  # round the nodes, never failed first
    assert set(clock.pauses) == {0.1}


def test_every_node_hung_gives_up_at_the_deadline_having_asked_each() -> None:
    metadata, net, clock = setup({A, B, C})
    start = clock.now()
    with pytest.raises(KafkaTimeoutError, match="no answer from"):
        metadata.refresh(["t"], 10.0)
    assert clock.now() - start == 10.0
    assert len(set(net.dests())) == len(net.dests()) == 2  # one at the start, one after 5 s
    assert clock.pauses == [5.0, 5.0]


def test_a_refused_node_after_a_hung_one_moves_on_after_the_retry_backoff() -> None:
    metadata, net, clock = setup({A})
    net.refusing.add(B)
    net.failures.update({B: 1.0, C: 2.0})  # asked in the order a, b, c
    start = clock.now()
    assert metadata.refresh(["t"], 10.0).leader(TP) == 1
    assert net.dests() == [A, B, C]
    assert clock.pauses == pytest.approx([5.0, 0.1])
    assert clock.now() - start == pytest.approx(5.1)


def test_a_refused_node_moves_on_after_the_retry_backoff() -> None:
    metadata, net, clock = setup(set(), bootstrap="a:1,b:2")
    answers = iter([refused, metadata_answer])

    def answer(body: Mapping[str, Any]) -> Any:
        return next(answers)(body)

    net.responders[ApiKey.METADATA] = answer
    assert metadata.refresh(["t"], 10.0).leader(TP) == 1
    assert len(set(net.dests())) == 2 and clock.pauses == [0.1]


def test_any_node_prefers_a_broker_with_nothing_in_flight() -> None:
    metadata, net, _ = setup({1}, bootstrap="h:1,h:2")
    metadata.cluster = Cluster(brokers={1: ("h", 1), 2: ("h", 2)})
    net.send(1, ApiKey.FETCH, {})
    assert {metadata.any_node() for _ in range(20)} == {2}


def test_bootstrap_servers_at_a_known_broker_address_are_not_asked_twice() -> None:
    metadata, _, _ = setup(set(), bootstrap="h:9092,b:2")
    metadata.refresh(["t"], 10.0)  # node 1 at h:9092
    assert metadata.nodes() == [1, B]


def test_a_failure_not_of_kafka_is_raised_at_once() -> None:
    metadata, net, _ = setup(set())

    def broken(body: Mapping[str, Any]) -> Any:
        raise ValueError("bad request mapping")

    net.responders[ApiKey.METADATA] = broken
    with pytest.raises(ValueError, match="bad request mapping"):
        metadata.refresh(["t"], 10.0)
