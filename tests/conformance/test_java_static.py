"""Static membership (group.instance.id) with Apache Kafka's Java consumer: a static member
that closes or is SIGKILLed and comes back within the session timeout gets its partitions
back in the same generation; the other member sees no rebalance."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, settle, tps_of, unique
from tests.conformance.javakit import JavaKit, JavaMember, generations_disjoint

pytestmark = pytest.mark.conformance




def test_static_member_comes_back_without_a_rebalance(broker: BrokerProcess,
                                                        java: JavaKit) -> None:
    topic, group = unique("jst"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    every = tps_of(topic, 4)

    def member(name: str, instance: str) -> JavaMember:
        # A session long enough for a JVM to restart within it.
        return JavaMember(java, broker.bootstrap, group, [topic], name,
                          **{"group.instance.id": instance, "session.timeout.ms": "10000"})

    a, b = member("a", "inst-a"), member("b", "inst-b")
    settle([a, b], every, counts=[2, 2])
    generation = b.generation()
    a_parts, b_parts = a.assignment(), b.assignment()
    b_callbacks = len(b.rebalances())

    a.close()  # a static member's close() leaves no LeaveGroup: it stays in the group
    a2 = member("a2", "inst-a")
    settle([a2, b], every, counts=[2, 2])
    assert a2.assignment() == a_parts
    assert a2.generation() == generation
    assert a2.driver.of("assigned")[0]["member"] != a.driver.of("assigned")[0]["member"]

    b.kill()  # SIGKILL: no word to the coordinator
    b2 = member("b2", "inst-b")
    settle([a2, b2], every, counts=[2, 2])
    assert b2.assignment() == b_parts
    assert b2.generation() == generation

    assert len(b.rebalances()) == b_callbacks, "b saw a rebalance"
    assert len(a2.rebalances()) == 1, "a2 saw a rebalance"
    assert generations_disjoint([a2, b2]) == []
    for m in (a2, b2):
        assert m.errors() == []
        m.close()
