"""Racks with third-party clients: ``broker.rack`` as confluent-kafka and kafka-python see it,
and librdkafka consumers with ``client.rack`` joining a group and consuming everything."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.admin import KafkaAdminClient

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    create_topic,
    drain,
    end_offsets,
    produce,
    settle,
    tps_of,
    unique,
)
from tests.conftest import FAST_GROUPS

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker started with ``broker.rack=a``."""
    proc = BrokerProcess(tmp_path_factory.mktemp("racked") / "data",
                         {**FAST_GROUPS, "broker.rack": "a"}).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


def test_confluent_describe_cluster_sees_rack(racked: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": racked.bootstrap})
    nodes = admin.describe_cluster().result(15).nodes
    assert [(n.id, n.rack) for n in nodes] == [(0, "a")]


def test_confluent_describe_configs_lists_broker_rack(racked: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": racked.bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    entry = admin.describe_configs([res])[res].result(15)["broker.rack"]
    assert entry.value == "a"
    assert not entry.is_default


def test_kafka_python_describe_cluster_sees_rack(racked: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=racked.bootstrap)
    try:
        brokers: list[dict[str, Any]] = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert [(b["broker_id"], b["rack"]) for b in brokers] == [(0, "a")]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_librdkafka_members_with_client_rack_consume_everything(racked: BrokerProcess,
                                                                 strategy: str) -> None:
    parts = 4
    topic, group = unique(f"racks-{strategy}"), unique("g")
    create_topic(racked.bootstrap, topic, parts)
    log = OwnershipLog()
    members = [
        Member(racked.bootstrap, group, f"in-{rack}", log,
               **{"partition.assignment.strategy": strategy, "client.rack": rack}
               ).subscribe([topic])
        for rack in ("a", "b")
    ]
    try:
        # Every replica is in rack "a", so (as in Kafka) racks do not change the balance.
        settle(members, tps_of(topic, parts), counts=[2, 2])
        # Records written once the group is stable: each is read exactly once (no commits).
        expected = produce(racked.bootstrap, topic, parts, 10)
        drain(members, end_offsets(racked.bootstrap, topic, parts))
        seen = [v for m in members for v in m.seen]
        assert sorted(seen) == sorted(expected)
        assert not log.violations
        assert not [e for m in members for e in m.errors]
    finally:
        for m in members:
            m.close()
