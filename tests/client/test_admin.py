"""samsa.Admin against the samsa broker: topics, partitions, offsets."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client import Admin, KafkaError, Producer
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.fakeclock import FakeClock
from tests.client.proxy import FaultProxy, answer


def test_create_grow_delete_topics(admin: Admin) -> None:
    admin.create_topics({"adm-a": 2, "adm-b": 1}, configs={"adm-b": {"retention.ms": "1000"}})
    assert admin.list_topics()["adm-a"] == 2
    with pytest.raises(KafkaError) as info:
        admin.create_topics({"adm-a": 2})
    assert info.value.code == 36  # TOPIC_ALREADY_EXISTS
    admin.create_topics({"adm-a": 2}, exist_ok=True)
    admin.create_partitions({"adm-a": 5})
    assert admin.list_topics()["adm-a"] == 5
    admin.delete_topics(["adm-a", "adm-b"])
    topics = admin.list_topics()
    assert "adm-a" not in topics and "adm-b" not in topics


def test_list_offsets_earliest_latest_and_by_time(broker: BrokerProcess, admin: Admin) -> None:
    admin.create_topics({"adm-offsets": 1})
    tp = TopicPartition("adm-offsets", 0)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(10):
            p.send("adm-offsets", value=b"x", timestamp_ms=1_000_000 + i * 1000)
    got = admin.list_offsets({tp: "earliest"})
    assert got[tp][0] == 0
    assert admin.list_offsets({tp: "latest"})[tp][0] == 10
    assert admin.list_offsets({tp: 1_004_500})[tp] == (5, 1_005_000)
    assert admin.list_offsets({tp: 9_999_999})[tp][0] == -1


def test_list_offsets_of_an_unknown_topic_fails_without_creating_it(admin: Admin) -> None:
    with pytest.raises(KafkaError) as info:
        admin.list_offsets({TopicPartition("adm-never-created", 0): "latest"})
    assert info.value.code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert "adm-never-created" not in admin.list_topics()


def test_group_calls_retry_a_loading_coordinator_on_the_injected_clock(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    """The admin client's waits and deadlines are on its clock: on a fake one it retries
    COORDINATOR_LOAD_IN_PROGRESS every 100 ms of fake time and gives up at the fake
    deadline (request_timeout_ms), never sleeping for real."""
    _, proxy = proxied
    proxy.always(ApiKey.FIND_COORDINATOR, answer(coordinators=[{
        "key": "g-loading", "node_id": -1, "host": "", "port": -1,
        "error_code": ErrorCode.coordinator_load_in_progress}]))
    clock = FakeClock()
    with Admin(bootstrap_servers=proxy.address, request_timeout_ms=1000, clock=clock) as a:
        start = clock.now()
        with pytest.raises(KafkaError) as info:
            a.find_coordinator("g-loading")
    assert info.value.code == ErrorCode.coordinator_load_in_progress
    assert clock.pauses and set(clock.pauses) == {0.1}
    assert 1.0 <= clock.now() - start <= 1.2
    assert proxy.seen[ApiKey.FIND_COORDINATOR] == len(clock.pauses) + 1
