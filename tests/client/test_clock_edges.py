"""Metadata refresh and ListOffsets retry on their owner's clock: on a fake one they pause
and give up at the fake deadline, never blocking on real time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import KafkaConnectionError, KafkaTimeoutError
from samsa.client.metadata import Cluster, Metadata
from samsa.client.offsets import LATEST, list_offsets
from samsa.protocol.api_keys import ApiKey
from tests.client.fakeclock import FakeClock, FakeNet

TP = TopicPartition("t", 0)


def metadata_answer(body: Any) -> Any:
    """One broker (node 1) leading ``t``-0."""
    part = SimpleNamespace(partition_index=0, leader_id=1, replica_nodes=[1])
    return SimpleNamespace(
        brokers=[SimpleNamespace(node_id=1, host="h", port=9092, rack=None)],
        topics=[SimpleNamespace(name="t", error_code=0, partitions=[part], topic_id=None,
                                is_internal=False)])


def refused(body: Any) -> Any:
    raise KafkaConnectionError("connection refused")


def setup(backoff_ms: int = 100) -> tuple[Metadata, FakeNet, FakeClock]:
    net, clock = FakeNet(request_timeout_ms=2000), FakeClock()
    return Metadata(net, "h:9092", backoff_ms, clock=clock), net, clock  # type: ignore[arg-type]


def test_refresh_backs_off_on_the_injected_clock() -> None:
    metadata, net, clock = setup(backoff_ms=250)
    answers = iter([refused, refused, metadata_answer])
    net.responders[ApiKey.METADATA] = lambda body: next(answers)(body)
    cluster = metadata.refresh(["t"], timeout_s=10)
    assert cluster.leader(TP) == 1
    assert clock.pauses == [0.25, 0.25]
    assert metadata.last_refresh == clock.now()


def test_refresh_gives_up_at_the_fake_deadline() -> None:
    metadata, net, clock = setup()
    net.responders[ApiKey.METADATA] = refused
    start = clock.now()
    with pytest.raises(KafkaTimeoutError, match="connection refused"):
        metadata.refresh(["t"], timeout_s=5)
    assert 4.9 <= clock.now() - start <= 5
    assert len(net.sent) == len(clock.pauses) + 1 >= 40


def test_unanswered_refresh_waits_on_the_injected_clock() -> None:
    metadata, _, clock = setup()  # no responder: requests are never answered
    start = clock.now()
    with pytest.raises(KafkaTimeoutError):
        metadata.refresh(["t"], timeout_s=5)
    # each attempt waits the request timeout (2 s) + 1 s on the fake clock
    assert clock.now() - start >= 5
    assert clock.pauses[0] == 3.0


def test_list_offsets_retries_then_gives_up_at_the_fake_deadline() -> None:
    metadata, net, clock = setup()
    metadata.cluster = Cluster(brokers={1: ("h", 9092)}, partitions={"t": {0: 1}})
    net.responders[ApiKey.METADATA] = metadata_answer
    net.responders[ApiKey.LIST_OFFSETS] = lambda body: SimpleNamespace(topics=[
        SimpleNamespace(name="t", partitions=[SimpleNamespace(
            partition_index=0, error_code=ErrorCode.not_leader_or_follower, offset=-1,
            timestamp=-1)])])
    start = clock.now()
    with pytest.raises(KafkaTimeoutError, match="ListOffsets"):
        list_offsets(metadata, {TP: LATEST}, timeout_s=3)
    assert clock.now() - start > 3
    assert clock.pauses and set(clock.pauses) == {0.1}
    apis = net.apis()
    assert apis.count(ApiKey.LIST_OFFSETS) == apis.count(ApiKey.METADATA) + 1 >= 25


def test_list_offsets_answer_after_a_retry() -> None:
    metadata, net, clock = setup()
    metadata.cluster = Cluster(brokers={1: ("h", 9092)}, partitions={"t": {0: 1}})
    net.responders[ApiKey.METADATA] = metadata_answer
    codes = iter([ErrorCode.leader_not_available, ErrorCode.none])
    net.responders[ApiKey.LIST_OFFSETS] = lambda body: SimpleNamespace(topics=[
        SimpleNamespace(name="t", partitions=[SimpleNamespace(
            partition_index=0, error_code=next(codes), offset=42, timestamp=-1)])])
    assert list_offsets(metadata, {TP: LATEST}, timeout_s=3) == {TP: (42, -1)}
    assert clock.pauses == [0.1]
