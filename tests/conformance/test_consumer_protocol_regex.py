"""Regex subscriptions of KIP-848 ``consumer`` groups resolved as Kafka resolves them: in the
background, off the heartbeat. What clients observe, with librdkafka (confluent-kafka,
``group.protocol=consumer``) and Apache Kafka's Java consumer 4.3: a member subscribing to a
regex and a topic name is assigned the named topic's partitions first, and the regex's
topics in a later epoch, once resolved; a topic created later that matches is picked up by
the first heartbeat 10 s (Kafka's ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``) after the last
resolution."""

from __future__ import annotations

import time

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import CpMember, JavaCpMember
from tests.conformance.groupkit import (
    OwnershipLog,
    create_topic,
    settle,
    tps_of,
    unique,
)
from tests.conformance.javakit import JavaKit, tps

pytestmark = pytest.mark.conformance


def test_rdkafka_gets_the_named_topic_then_the_regex_topics(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    prefix, group = unique("rx2"), unique("g")
    literal = f"lit-{prefix}"
    create_topic(bootstrap, literal, 2)
    create_topic(bootstrap, f"{prefix}-a", 2)
    create_topic(bootstrap, f"{prefix}-b", 1)
    log = OwnershipLog()
    m = CpMember(bootstrap, group, "m", log).subscribe([literal, f"^{prefix}-.*"])
    try:
        every = tps_of(literal, 2) | tps_of(f"{prefix}-a", 2) | tps_of(f"{prefix}-b", 1)
        settle([m], every, counts=[5], timeout=45)
        steps = [set(e[3]) for e in log.events if e[1] == "m" and e[2] == "assign" and e[3]]
        assert steps[0] == tps_of(literal, 2), steps  # the join's target: the named topic
        assert set().union(*steps[1:]) == every - tps_of(literal, 2), steps
        assert log.violations == []
    finally:
        m.close()


def test_a_new_matching_topic_is_picked_up_within_the_refresh(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    prefix, group = unique("rx3"), unique("g")
    create_topic(bootstrap, f"{prefix}-a", 2)
    m = CpMember(bootstrap, group, "m", OwnershipLog()).subscribe([f"^{prefix}-.*"])
    try:
        settle([m], tps_of(f"{prefix}-a", 2), counts=[2], timeout=45)
        created = time.monotonic()
        create_topic(bootstrap, f"{prefix}-b", 3)
        settle([m], tps_of(f"{prefix}-a", 2) | tps_of(f"{prefix}-b", 3), counts=[5],
               timeout=45)
        # at most the 10 s since the last resolution, an assignment interval (1 s) and a
        # few heartbeats (300 ms) and metadata refreshes (1 s)
        assert time.monotonic() - created < 20
    finally:
        m.close()


def test_java_gets_the_pattern_topics_after_the_join(cp_broker: BrokerProcess,
                                                    java: JavaKit) -> None:
    """The Java consumer subscribes to a SubscriptionPattern alone (it sends no topic names
    with it): its join is answered with an empty assignment, the pattern's topics come in a
    later epoch."""
    bootstrap = cp_broker.bootstrap
    prefix, group = unique("jrx"), unique("g")
    create_topic(bootstrap, f"{prefix}-a", 2)
    create_topic(bootstrap, f"{prefix}-b", 1)
    m = JavaCpMember(java, bootstrap, group, f"{prefix}-.*", "m", **{"driver.pattern": "true"})
    try:
        every = tps_of(f"{prefix}-a", 2) | tps_of(f"{prefix}-b", 1)
        settle([m], every, counts=[3], timeout=60)
        assigned = [e for e in m.rebalances() if e["event"] == "assigned"]
        first, last = assigned[0], assigned[-1]
        assert tps(first["assignment"]) == set(), assigned
        assert tps(last["assignment"]) == every
        assert int(last["epoch"]) > int(first["epoch"]), assigned
        assert m.errors() == []
    finally:
        m.close()
