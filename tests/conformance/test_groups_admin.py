"""Group administration through confluent-kafka's AdminClient (list with a state filter,
describe with decoded assignments, delete, alter/list offsets) and kafka-python's
KafkaAdminClient for OffsetDelete (confluent-kafka's Python binding does not expose
DeleteConsumerGroupOffsets)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KpTp
from kafka.admin import KafkaAdminClient

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import Member, create_topic, produce, settle, tps_of, unique

pytestmark = pytest.mark.conformance

PARTS = 4


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def setup(broker: BrokerProcess) -> Iterator[tuple[str, str, str, list[Member]]]:
    """A topic, a Stable group of two range members and an Empty group with offsets."""
    topic, live, empty = unique("gadm"), unique("live"), unique("empty")
    create_topic(broker.bootstrap, topic, PARTS)
    produce(broker.bootstrap, topic, PARTS, 3)
    old = Member(broker.bootstrap, empty, "old").subscribe([topic])
    settle([old], tps_of(topic, PARTS))
    old.consumer.commit(offsets=[TopicPartition(topic, p, p + 1) for p in range(PARTS)],
                        asynchronous=False)
    old.close()
    members = [Member(broker.bootstrap, live, n, **{"partition.assignment.strategy": "range"})
               .subscribe([topic]) for n in ("m1", "m2")]
    settle(members, tps_of(topic, PARTS), counts=[2, 2])
    yield topic, live, empty, members
    for m in members:
        m.close()


def _offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTS)])
    res = admin.list_consumer_group_offsets([req])[group].result(15)
    assert all(tp.error is None for tp in res.topic_partitions)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def _listed(admin: AdminClient, *states: ConsumerGroupState) -> dict[str, ConsumerGroupState]:
    kwargs = {"states": set(states)} if states else {}
    result = admin.list_consumer_groups(request_timeout=15, **kwargs).result(15)
    assert not result.errors
    return {g.group_id: g.state for g in result.valid}


def test_list_and_describe(admin: AdminClient,
                           setup: tuple[str, str, str, list[Member]]) -> None:
    topic, live, empty, members = setup
    assert _listed(admin).keys() >= {live, empty}
    stable = _listed(admin, ConsumerGroupState.STABLE)
    assert live in stable and empty not in stable
    only_empty = _listed(admin, ConsumerGroupState.EMPTY)
    assert only_empty.get(empty) == ConsumerGroupState.EMPTY and live not in only_empty

    d = admin.describe_consumer_groups([live])[live].result(15)
    assert d.state == ConsumerGroupState.STABLE
    assert d.partition_assignor == "range"
    assert d.coordinator.id == 0
    assert not d.is_simple_consumer_group
    by_id = {m.member_id: m for m in d.members}
    assert by_id.keys() == {m.consumer.memberid() for m in members}
    for m in members:
        described = by_id[m.consumer.memberid()]
        assert described.client_id == m.name
        assert described.host  # "/127.0.0.1" in Kafka's format
        got = {(tp.topic, tp.partition) for tp in described.assignment.topic_partitions}
        assert got == m.assignment()

    e = admin.describe_consumer_groups([empty])[empty].result(15)
    assert e.state == ConsumerGroupState.EMPTY and e.members == []
    assert _offsets(admin, empty, topic) == {p: p + 1 for p in range(PARTS)}


def test_delete_groups(admin: AdminClient, setup: tuple[str, str, str, list[Member]]) -> None:
    topic, live, empty, members = setup
    with pytest.raises(KafkaException) as exc:
        admin.delete_consumer_groups([live])[live].result(15)
    assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

    admin.delete_consumer_groups([empty])[empty].result(15)
    assert empty not in _listed(admin)
    assert _offsets(admin, empty, topic) == dict.fromkeys(range(PARTS), -1001)
    with pytest.raises(KafkaException) as exc:
        admin.delete_consumer_groups([empty])[empty].result(15)
    assert exc.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND

    for m in members:
        m.close()
    admin.delete_consumer_groups([live])[live].result(15)  # Empty now: deleted
    assert live not in _listed(admin)


def test_alter_list_and_delete_offsets(broker: BrokerProcess, admin: AdminClient,
                                       setup: tuple[str, str, str, list[Member]]) -> None:
    topic, live, empty, _ = setup
    target = {0: 2, 1: 3, 2: 1, 3: 0}
    req = ConsumerGroupTopicPartitions(
        empty, [TopicPartition(topic, p, o) for p, o in target.items()])
    res = admin.alter_consumer_group_offsets([req])[empty].result(15)
    assert all(tp.error is None for tp in res.topic_partitions)
    assert _offsets(admin, empty, topic) == target

    # A group with live members refuses offsets from outside it (no member id).
    req = ConsumerGroupTopicPartitions(live, [TopicPartition(topic, 0, 1)])
    with pytest.raises(KafkaException):
        res = admin.alter_consumer_group_offsets([req])[live].result(15)
        errors = [tp.error for tp in res.topic_partitions if tp.error is not None]
        if errors:
            raise KafkaException(errors[0])

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = kp.delete_group_offsets(empty, [KpTp(topic, 0), KpTp(topic, 1)])
        assert {tp.partition: err.errno for tp, err in result.items()} == {0: 0, 1: 0}
        assert _offsets(admin, empty, topic) == {0: -1001, 1: -1001, 2: 1, 3: 0}
        # The live group subscribes to the topic: its offsets cannot be deleted.
        result = kp.delete_group_offsets(live, [KpTp(topic, 0)])
        assert [err.errno for err in result.values()] == [
            KafkaError.GROUP_SUBSCRIBED_TO_TOPIC]
    finally:
        kp.close()
