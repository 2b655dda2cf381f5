"""Subscriptions that grow: partitions added to a subscribed topic, and a regex subscription
picking up a topic created later (librdkafka notices both on a metadata refresh and rejoins)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

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

pytestmark = pytest.mark.conformance

REFRESH = {"topic.metadata.refresh.interval.ms": 300}


def test_added_partitions_are_assigned(broker: BrokerProcess) -> None:
    topic, group = unique("gadd"), unique("g")
    create_topic(broker.bootstrap, topic, 2)
    log = OwnershipLog()
    members = [Member(broker.bootstrap, group, n, log, **REFRESH).subscribe([topic])
               for n in ("a", "b")]
    try:
        settle(members, tps_of(topic, 2), counts=[1, 1])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(15)
        settle(members, tps_of(topic, 6), counts=[3, 3])
        expected = produce(broker.bootstrap, topic, 6, 3)

        def consumed() -> bool:
            for m in members:
                m.poll()
            return expected <= {v for m in members for v in m.seen}

        wait_until(consumed, what="records of the new partitions consumed")
        assert log.violations == []
    finally:
        for m in members:
            m.close()


def test_pattern_subscription_picks_up_new_topic(broker: BrokerProcess) -> None:
    prefix = unique("gpat")
    first, second, other = f"{prefix}-one", f"{prefix}-two", unique("gpat-other")
    create_topic(broker.bootstrap, first, 2)
    create_topic(broker.bootstrap, other, 2)
    group = unique("g")
    log = OwnershipLog()
    members = [Member(broker.bootstrap, group, n, log, **REFRESH).subscribe([f"^{prefix}-.*"])
               for n in ("a", "b")]
    try:
        settle(members, tps_of(first, 2), counts=[1, 1])
        create_topic(broker.bootstrap, second, 2)
        settle(members, tps_of(first, 2) | tps_of(second, 2), counts=[2, 2])
        expected = produce(broker.bootstrap, second, 2, 3)

        def consumed() -> bool:
            for m in members:
                m.poll()
            return expected <= {v for m in members for v in m.seen}

        wait_until(consumed, what="records of the new topic consumed")
        assert log.violations == []
    finally:
        for m in members:
            m.close()
