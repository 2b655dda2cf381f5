"""Classic consumer groups of Apache Kafka's Java consumer with each of its assignors: members
join, leave (close) and die (SIGKILL of the JVM) while records flow. After every change the
assignment covers each partition exactly once, no generation gives a partition to two
members, the coordinator's view matches the members', and every record is consumed."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Tp,
    create_topic,
    produce,
    settle,
    tps_of,
    unique,
    wait_until,
)
from tests.conformance.javakit import (
    ASSIGNORS,
    JavaKit,
    JavaMember,
    coordinator_view,
    generations_disjoint,
)

pytestmark = pytest.mark.conformance

PARTS = 6




@pytest.mark.parametrize("assignor", list(ASSIGNORS))
def test_members_join_leave_and_die(broker: BrokerProcess, java: JavaKit, assignor: str) -> None:
    topic, group = unique(f"jg-{assignor}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    expected = {v.decode() for v in produce(broker.bootstrap, topic, PARTS, 5, "a")}

    def member(name: str) -> JavaMember:
        return JavaMember(java, broker.bootstrap, group, [topic], name,
                          **{"partition.assignment.strategy": ASSIGNORS[assignor]})

    a, b = member("a"), member("b")
    settle([a, b], every, counts=[3, 3])
    c = member("c")
    settle([a, b, c], every, counts=[2, 2, 2])
    a_before_leave = a.assignment()
    expected |= {v.decode() for v in produce(broker.bootstrap, topic, PARTS, 5, "b")}

    b.close()  # a dynamic member's close() sends LeaveGroup
    settle([a, c], every, counts=[3, 3])
    a_before_kill = a.assignment()
    c.kill()  # gone without a word: the coordinator evicts it after session.timeout.ms
    settle([a], every, counts=[6])
    expected |= {v.decode() for v in produce(broker.bootstrap, topic, PARTS, 5, "c")}

    members = [a, b, c]
    wait_until(lambda: expected <= {v for m in members for v in m.values()},
               what="every record consumed")
    assert generations_disjoint(members) == []
    wait_until(lambda: coordinator_view(broker.bootstrap, group) == ("STABLE", {"a": every}),
               what="the coordinator to describe a alone with every partition")
    assert a.errors() == []
    if assignor in ("sticky", "cooperative-sticky"):
        # Members that leave never cost a survivor a partition.
        assert a_before_leave <= a_before_kill <= a.assignment()
    held: set[Tp] = set()
    for e in a.rebalances():
        parts = {(t, p) for t, p in e["partitions"]}
        if e["event"] == "assigned":
            held = {(t, p) for t, p in e["assignment"]}
        elif assignor == "cooperative-sticky":
            assert parts < held, f"a gave up everything it held: {e}"
        else:
            assert parts == held, f"an eager member revokes all it holds: {e}"
    a.close()
