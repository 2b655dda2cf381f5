"""Racks in live groups: ``broker.rack`` in Metadata, ``client_rack`` in subscriptions, and
replica racks handed to the leader's assignor (KIP-881), against a real broker over TCP."""

from __future__ import annotations

import importlib
import itertools
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest

from samsa import TopicPartition
from samsa.assignors import Assignment, ClusterView, RangeAssignor, Subscription
from samsa.client import Admin, Consumer
from samsa.client.metadata import Metadata
from samsa.client.net import NetworkClient
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.runner import Runner
from tests.conftest import FAST_GROUPS
from tests.wire import WireClient

pytestmark = pytest.mark.slow
_names = itertools.count()


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker started with ``broker.rack=a``: every replica lives in rack "a"."""
    data: Path = tmp_path_factory.mktemp("racked") / "data"
    proc = BrokerProcess(data, {**FAST_GROUPS, "broker.rack": "a"}).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


def new_topic(broker: BrokerProcess, partitions: int) -> tuple[str, str]:
    """A fresh topic and group name."""
    n = next(_names)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics({f"racks-{n}": partitions})
    return f"racks-{n}", f"racks-g-{n}"


def consumer(broker: BrokerProcess, group: str, strategy: object, **kw: Any) -> Consumer:
    return Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                    auto_offset_reset="earliest", session_timeout_ms=3000,
                    heartbeat_interval_ms=200, max_poll_interval_ms=10000,
                    partition_assignment_strategy=[strategy], **kw)


def settled(runners: list[Runner], parts: set[TopicPartition]) -> bool:
    """Every runner stable and every partition owned exactly once."""
    owned = [tp for r in runners for tp in r.assignment]
    return (all(r.stable() for r in runners) and len(owned) == len(set(owned))
            and set(owned) == parts)


@pytest.mark.parametrize("version", [0, 1, 12])
def test_metadata_and_describe_cluster_carry_broker_rack(racked: BrokerProcess,
                                                         version: int) -> None:
    """Metadata v1+ and DescribeCluster carry ``broker.rack``; v0 has no rack field."""
    request = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    body = {"topics": None if version else ()}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    if version >= 8:
        body["include_topic_authorized_operations"] = False
    client = WireClient(racked.bootstrap)
    try:
        brokers = client.call(3, version, request.MetadataRequest(**body)).brokers
        cluster = client.call(60, 0, DescribeClusterRequest(
            include_cluster_authorized_operations=False)).brokers
    finally:
        client.close()
    assert [getattr(b, "rack", "no field") for b in brokers] == (
        ["no field"] if version == 0 else ["a"])
    assert [(b.broker_id, b.rack) for b in cluster] == [(0, "a")]


def test_client_metadata_maps_replicas_to_broker_racks(racked: BrokerProcess) -> None:
    topic, _ = new_topic(racked, 3)
    net = NetworkClient("racks-test")
    try:
        cluster = Metadata(net, racked.bootstrap).refresh([topic])
    finally:
        net.close()
    assert cluster.racks == {0: "a"}
    assert cluster.replicas[topic] == {0: (0,), 1: (0,), 2: (0,)}
    assert cluster.partition_racks(topic) == [frozenset({"a"})] * 3


def test_client_metadata_without_broker_rack(broker: BrokerProcess) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics({"racks-none": 2})
    net = NetworkClient("racks-test")
    try:
        cluster = Metadata(net, broker.bootstrap).refresh(["racks-none"])
    finally:
        net.close()
    assert cluster.racks == {}
    assert cluster.partition_racks("racks-none") == [frozenset(), frozenset()]


class RackRecorder(RangeAssignor):
    """Range, recording what the leader's assignor is given."""

    name = "rack-recorder"
    calls: list[tuple[ClusterView, dict[str, str | None]]] = []
    lock = threading.Lock()

    def assign(self, cluster: ClusterView,
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        with self.lock:
            self.calls.append((cluster, {m: s.rack_id for m, s in subscriptions.items()}))
        return super().assign(cluster, subscriptions)


def test_leader_assignor_gets_member_and_replica_racks(racked: BrokerProcess,
                                                        runners: list[Runner]) -> None:
    topic, group = new_topic(racked, 4)
    parts = {TopicPartition(topic, p) for p in range(4)}
    RackRecorder.calls.clear()
    for rack in ("a", "b"):
        r = Runner(consumer(racked, group, RackRecorder(), client_rack=rack), [topic])
        r.start()
        runners.append(r)
    wait_until(lambda: settled(runners, parts))
    with RackRecorder.lock:
        view, member_racks = RackRecorder.calls[-1]
    assert sorted(member_racks.values()) == ["a", "b"]  # type: ignore[type-var]
    assert view.partitions_per_topic == {topic: 4}
    assert dict(view.partition_racks) == {topic: [frozenset({"a"})] * 4}


def test_members_without_racks_give_no_replica_racks(racked: BrokerProcess,
                                                     runners: list[Runner]) -> None:
    topic, group = new_topic(racked, 2)
    RackRecorder.calls.clear()
    r = Runner(consumer(racked, group, RackRecorder()), [topic])
    r.start()
    runners.append(r)
    wait_until(lambda: settled(runners, {TopicPartition(topic, p) for p in range(2)}))
    with RackRecorder.lock:
        view, member_racks = RackRecorder.calls[-1]
    assert list(member_racks.values()) == [None]
    assert dict(view.partition_racks) == {}


# Kafka's rule (AbstractPartitionAssignor.useRackAwareAssignment): racks are used only when the
# partitions' replica racks differ. On this one-broker cluster every partition lives in rack
# "a", so the rack-aware range and sticky assignors give exactly the plain assignment: the
# member in rack "b" keeps its balanced share. Range order (not rack "a") decides who gets the
# first range; the sticky ones let the member in rack "b", which joined first and owns all
# four, keep its first two rather than hand the rack-"a" member partitions by rack.
@pytest.mark.parametrize("strategy", ["range", "sticky", "cooperative-sticky"])
def test_rack_aware_assignors_follow_kafka_on_a_one_rack_cluster(
        racked: BrokerProcess, runners: list[Runner], strategy: str) -> None:
    topic, group = new_topic(racked, 4)
    parts = {TopicPartition(topic, p) for p in range(4)}
    # Static members order by instance id: "m0" (rack b) sorts before "m1" (rack a).
    for instance, rack in (("m0", "b"), ("m1", "a")):
        r = Runner(consumer(racked, group, strategy, client_rack=rack,
                            group_instance_id=instance), [topic])
        r.start()
        runners.append(r)
        wait_until(lambda: settled(runners, parts))
    b_member, a_member = runners
    want = ({TopicPartition(topic, 0), TopicPartition(topic, 1)},
            {TopicPartition(topic, 2), TopicPartition(topic, 3)})
    wait_until(lambda: (b_member.assignment, a_member.assignment) == want,
               describe=lambda: (sorted(b_member.assignment), sorted(a_member.assignment)))
