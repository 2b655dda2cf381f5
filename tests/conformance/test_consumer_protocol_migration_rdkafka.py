"""Online migration with librdkafka (confluent-kafka): a live classic group (two classic
members) gains a ``group.protocol=consumer`` member, becomes a consumer group whose classic
members go on through JoinGroup/SyncGroup, and becomes classic again when that member leaves.
Records flow throughout: every one is consumed, the members split the partitions exactly
after each step, no partition is assigned to a member while another live member holds it
(every member's rebalance callbacks in one ownership log), and the final commits equal the
end offsets. The Java client's twin is test_consumer_protocol_migration.

librdkafka's ``cooperative-sticky`` leader copies each member's sticky user data into its
assignment (from the second generation on). Kafka 4.x refuses to upgrade such a group
(KAFKA-18134: "an unsupported custom assignor is in use", GROUP_ID_NOT_FOUND, fatal for the
librdkafka member), and so does samsa: the migration runs with librdkafka's ``range`` (eager)
and ``roundrobin``, and the cooperative-sticky group is checked to stay classic and unharmed.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupType, KafkaError
from confluent_kafka.admin import AdminClient

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import CpMember, fatal_errors
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    committed,
    create_topic,
    drain,
    end_offsets,
    poll_all,
    produce,
    settle,
    tps_of,
    unique,
    wait_until,
)

pytestmark = pytest.mark.conformance

PARTITIONS = 6


def _classic(strategy: str) -> dict[str, object]:
    return {"partition.assignment.strategy": strategy, "session.timeout.ms": 3000}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_classic_group_gains_and_loses_a_consumer_member(cp_broker: BrokerProcess,
                                                         strategy: str) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("migrd"), unique("g")
    create_topic(bootstrap, topic, PARTITIONS)
    every = tps_of(topic, PARTITIONS)
    expected = produce(bootstrap, topic, PARTITIONS, 5, "a")
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def group_type() -> ConsumerGroupType:
        return admin.describe_consumer_groups([group])[group].result(15).type

    log = OwnershipLog()
    a = Member(bootstrap, group, "a", log, **_classic(strategy)).subscribe([topic])
    b = Member(bootstrap, group, "b", log, **_classic(strategy)).subscribe([topic])
    members: list[Member] = [a, b]
    try:
        settle(members, every, counts=[3, 3])
        assert group_type() == ConsumerGroupType.CLASSIC

        c = CpMember(bootstrap, group, "c", log).subscribe([topic])  # group.protocol=consumer
        members.append(c)
        settle(members, every, counts=[2, 2, 2], timeout=45)
        wait_until(lambda: group_type() == ConsumerGroupType.CONSUMER,
                   what="the group to become a consumer group")
        expected |= produce(bootstrap, topic, PARTITIONS, 5, "b")
        drain(members, end_offsets(bootstrap, topic, PARTITIONS), timeout=45)
        assert c.commit()  # what the consumer-protocol member read, before it leaves

        c.close()  # the last consumer-protocol member leaves: back to a classic group
        settle([a, b], every, counts=[3, 3], timeout=45)
        wait_until(lambda: group_type() == ConsumerGroupType.CLASSIC,
                   what="the group to become classic again")
        expected |= produce(bootstrap, topic, PARTITIONS, 5, "c")

        ends = end_offsets(bootstrap, topic, PARTITIONS)
        drain([a, b], ends, timeout=45)
        wait_until(lambda: a.commit() and b.commit(), what="the classic members' commits")
        assert committed(bootstrap, group, every) == ends
        assert expected <= {v for m in members for v in m.seen}
        assert log.violations == []
        assert [fatal_errors(m.errors) for m in members] == [[], [], []]
    finally:
        for m in members:
            m.close()


def test_cooperative_sticky_user_data_refuses_the_upgrade(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("migcs"), unique("g")
    create_topic(bootstrap, topic, PARTITIONS)
    every = tps_of(topic, PARTITIONS)
    expected = produce(bootstrap, topic, PARTITIONS, 5, "a")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    log = OwnershipLog()
    classic = _classic("cooperative-sticky")
    a = Member(bootstrap, group, "a", log, **classic).subscribe([topic])
    b = Member(bootstrap, group, "b", log, **classic).subscribe([topic])
    members: list[Member] = [a, b]
    try:
        settle(members, every, counts=[3, 3])
        x = Member(bootstrap, group, "x", log, **classic).subscribe([topic])
        settle([a, b, x], every, counts=[2, 2, 2])  # a generation with sticky user data
        x.close()
        settle(members, every, counts=[3, 3])

        c = CpMember(bootstrap, group, "c", log).subscribe([topic])  # group.protocol=consumer
        members.append(c)
        wait_until(lambda: (poll_all(members), bool(c.errors))[1],
                   what="the consumer-protocol member's error")
        fatal = c.errors[0]  # librdkafka reports GROUP_ID_NOT_FOUND as a fatal error
        assert fatal.code() == KafkaError._FATAL and "group id does not exist" in fatal.str()
        assert not c.assignment()
        desc = admin.describe_consumer_groups([group])[group].result(15)
        assert desc.type == ConsumerGroupType.CLASSIC and len(desc.members) == 2

        expected |= produce(bootstrap, topic, PARTITIONS, 5, "b")
        ends = end_offsets(bootstrap, topic, PARTITIONS)
        drain([a, b], ends, timeout=45)
        wait_until(lambda: a.commit() and b.commit(), what="the classic members' commits")
        assert committed(bootstrap, group, every) == ends
        assert expected <= {v for m in (a, b) for v in m.seen}
        assert log.violations == []
        assert [fatal_errors(m.errors) for m in (a, b)] == [[], []]
        members.remove(c)
        c.consumer.close()  # a fatal consumer: no LeaveGroup
    finally:
        for m in members:
            m.close()
