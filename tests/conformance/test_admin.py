"""Topic administration, configs, cluster and offsets through confluent-kafka's AdminClient."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.conformance


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_create_describe_grow_delete(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = _name("adm")
    admin.create_topics([NewTopic(name, num_partitions=2,
                                  config={"retention.ms": "3600000"})])[name].result(15)
    md = admin.list_topics(name, timeout=10)
    assert sorted(md.topics[name].partitions) == [0, 1]
    assert md.topics[name].partitions[0].leader == 0

    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(15)
    assert "already exists" in str(exc.value)

    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default

    admin.create_partitions([NewPartitions(name, 5)])[name].result(15)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 5
    with pytest.raises(KafkaException):
        admin.create_partitions([NewPartitions(name, 3)])[name].result(15)

    admin.delete_topics([name])[name].result(15)
    deadline = time.monotonic() + 10
    while name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in admin.list_topics(timeout=10).topics


def test_bad_topic_configs_and_replication(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bad_cfg, bad_rf, bad_name = _name("cfg"), _name("rf"), "bad/name"
    futures = admin.create_topics([
        NewTopic(bad_cfg, num_partitions=1, config={"retention.ms": "soon"}),
        NewTopic(bad_rf, num_partitions=1, replication_factor=3),
        NewTopic(bad_name, num_partitions=1),
    ])
    for name, fragment in ((bad_cfg, "retention.ms"), (bad_rf, "replication"),
                           (bad_name, "characters")):
        with pytest.raises(KafkaException) as exc:
            futures[name].result(15)
        assert fragment in str(exc.value).lower() or fragment in str(exc.value)


def test_describe_cluster_and_broker_configs(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = admin.describe_cluster().result(15)
    assert [n.id for n in cluster.nodes] == [0]
    assert cluster.controller.id == 0
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["num.partitions"].value == "1"
    assert configs["group.initial.rebalance.delay.ms"].value == "0"
    assert not configs["group.initial.rebalance.delay.ms"].is_default


def test_list_offsets_earliest_latest_and_by_time(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = _name("lo")
    admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        p.produce(name, value=b"x", timestamp=base + i * 1000)
        p.flush(10)  # one batch per record, so timestamps are batch-exact
    tp = TopicPartition(name, 0)

    def lookup(spec: OffsetSpec) -> tuple[int, int]:
        r = admin.list_offsets({tp: spec})[tp].result(15)
        return r.offset, r.timestamp

    assert lookup(OffsetSpec.earliest())[0] == 0
    assert lookup(OffsetSpec.latest())[0] == 10
    assert lookup(OffsetSpec.for_timestamp(base + 4500)) == (5, base + 5000)
    assert lookup(OffsetSpec.for_timestamp(base))[0] == 0
    assert lookup(OffsetSpec.for_timestamp(base + 10**6))[0] == -1
    assert lookup(OffsetSpec.max_timestamp()) == (9, base + 9000)


def test_topics_and_data_survive_restart(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("keep", num_partitions=3,
                                  config={"cleanup.policy": "compact"})])["keep"].result(15)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "acks": "all"})
    for i in range(300):
        p.produce("keep", key=str(i).encode(), value=str(i).encode(), partition=i % 3)
    assert p.flush(15) == 0
    assert fresh_broker.stop() == 0
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    md = admin.list_topics("keep", timeout=10)
    assert len(md.topics["keep"].partitions) == 3
    res = ConfigResource(ConfigResource.Type.TOPIC, "keep")
    assert admin.describe_configs([res])[res].result(15)["cleanup.policy"].value == "compact"
    ends = admin.list_offsets({TopicPartition("keep", i): OffsetSpec.latest() for i in range(3)})
    assert sorted(f.result(15).offset for f in ends.values()) == [100, 100, 100]
