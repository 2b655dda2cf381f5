"""One classic group of Apache Kafka's Java consumers and librdkafka (confluent-kafka)
consumers with the same assignor ("range", "roundrobin", "cooperative-sticky" name the same
protocol in both clients). The leader changes client between rebalances, so each client's
assignor computes assignments for the other's members; every partition stays owned exactly
once and every record is consumed."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    create_topic,
    produce,
    settle,
    tps_of,
    unique,
    wait_until,
)
from tests.conformance.javakit import ASSIGNORS, JavaKit, JavaMember, coordinator_view

pytestmark = pytest.mark.conformance

PARTS = 6




@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_java_and_librdkafka_share_a_group(broker: BrokerProcess, java: JavaKit,
                                           assignor: str) -> None:
    topic, group = unique(f"jmx-{assignor}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    expected = {v.decode() for v in produce(broker.bootstrap, topic, PARTS, 5, "a")}
    log = OwnershipLog()

    def java_member(name: str) -> JavaMember:
        return JavaMember(java, broker.bootstrap, group, [topic], name,
                          **{"partition.assignment.strategy": ASSIGNORS[assignor]})

    def rd_member(name: str) -> Member:
        return Member(broker.bootstrap, group, name, log,
                      **{"partition.assignment.strategy": assignor}).subscribe([topic])

    j1 = java_member("j1")
    rds: list[Member] = []
    try:
        settle([j1], every)  # j1 leads: the Java assignor assigns the librdkafka members
        rds = [rd_member("r1"), rd_member("r2")]
        settle([j1, *rds], every, counts=[2, 2, 2])
        assert coordinator_view(broker.bootstrap, group)[1] == {
            "j1": j1.assignment(), **{r.name: r.assignment() for r in rds}}

        j1.close()  # the leader leaves: librdkafka's assignor takes over
        settle(rds, every, counts=[3, 3])
        j2 = java_member("j2")  # ... and assigns a Java member
        settle([j2, *rds], every, counts=[2, 2, 2])
        expected |= {v.decode() for v in produce(broker.bootstrap, topic, PARTS, 5, "b")}

        def consumed() -> set[str]:
            settle([j2, *rds], every)  # keeps the librdkafka members polling
            return {v.decode() for r in rds for v in r.seen} | set(j1.values()) | set(
                j2.values())

        wait_until(lambda: expected <= consumed(), what="every record consumed")
        state, view = coordinator_view(broker.bootstrap, group)
        assert (state, view) == ("STABLE", {"j2": j2.assignment(),
                                            **{r.name: r.assignment() for r in rds}})
        assert log.violations == []
        assert j1.errors() == [] and j2.errors() == []
        assert not [e for r in rds for e in r.errors if e.fatal()]
        j2.close()
    finally:
        for r in rds:
            r.close()
