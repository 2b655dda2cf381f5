"""samsa.Admin against the samsa broker: topics, partitions, offsets."""

from __future__ import annotations

import pytest

from samsa import TopicPartition
from samsa.client import Admin, KafkaError, Producer
from tests.brokerproc import BrokerProcess


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
