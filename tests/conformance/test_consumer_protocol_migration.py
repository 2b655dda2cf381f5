"""Online migration with Apache Kafka's Java consumer 4.3: a live classic group (two classic
members, cooperative-sticky) gains a ``group.protocol=consumer`` member, becomes a consumer
group whose classic members go on through JoinGroup/SyncGroup, and becomes classic again when
that member leaves. Records flow throughout: every one is consumed, the members split the
partitions exactly after each step, and no partition is assigned while another live member
still holds it (every member's callbacks replayed in wall-clock order)."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import JavaCpMember, double_owners
from tests.conformance.groupkit import create_topic, produce, settle, tps_of, unique, wait_until
from tests.conformance.javakit import ASSIGNORS, JavaKit

pytestmark = pytest.mark.conformance

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": "3000",
           "heartbeat.interval.ms": "300",
           "partition.assignment.strategy": ASSIGNORS["cooperative-sticky"]}


def test_classic_group_gains_and_loses_a_consumer_member(cp_broker: BrokerProcess,
                                                         java: JavaKit) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("mig"), unique("g")
    create_topic(bootstrap, topic, 6)
    every = tps_of(topic, 6)
    expected = {v.decode() for v in produce(bootstrap, topic, 6, 5, "a")}
    admin = java.start("AdminDriver", bootstrap)

    def group_type() -> str:
        reply = admin.request(f"describe-groups {group}")
        assert reply["ok"], reply
        return str(reply["groups"][group]["type"])

    a = JavaCpMember(java, bootstrap, group, topic, "a", **CLASSIC)
    b = JavaCpMember(java, bootstrap, group, topic, "b", **CLASSIC)
    members = [a, b]
    settle(members, every, counts=[3, 3])
    assert group_type() == "Classic"

    c = JavaCpMember(java, bootstrap, group, topic, "c")  # group.protocol=consumer
    members.append(c)
    settle(members, every, counts=[2, 2, 2], timeout=45)
    wait_until(lambda: group_type() == "Consumer", what="the group to become a consumer group")
    expected |= {v.decode() for v in produce(bootstrap, topic, 6, 5, "b")}

    c.close()  # the last consumer-protocol member leaves: back to a classic group
    settle([a, b], every, counts=[3, 3], timeout=45)
    wait_until(lambda: group_type() == "Classic", what="the group to become classic again")
    expected |= {v.decode() for v in produce(bootstrap, topic, 6, 5, "c")}

    wait_until(lambda: expected <= {v for m in members for v in m.values()},
               what="every record consumed")
    assert double_owners(members) == []
    for m in (a, b):
        assert m.errors() == []
        m.close()
    admin.close()
