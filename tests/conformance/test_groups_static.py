"""Static membership (group.instance.id) with confluent-kafka: a restart within the session
timeout keeps the generation and the assignment; a second consumer with the same instance
id fences the first."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    create_topic,
    generation_of,
    poll_all,
    settle,
    tps_of,
    unique,
    wait_until,
)

pytestmark = pytest.mark.conformance


def test_static_member_restarts_without_rebalance(broker: BrokerProcess) -> None:
    topic, group = unique("gst"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    every = tps_of(topic, 4)
    log = OwnershipLog()

    def member(name: str, instance: str) -> Member:
        return Member(broker.bootstrap, group, name, log,
                      **{"group.instance.id": instance}).subscribe([topic])

    a, b = member("a", "inst-a"), member("b", "inst-b")
    a2: Member | None = None
    try:
        settle([a, b], every, counts=[2, 2])
        b_id = b.consumer.memberid()
        generation = generation_of(broker.bootstrap, group, b_id)
        a_parts, a_id = a.assignment(), a.consumer.memberid()
        b_callbacks = log.callbacks("b")

        a.close()  # a static member sends no LeaveGroup
        log.mark_dead("a")
        a2 = member("a2", "inst-a")
        settle([a2, b], every, counts=[2, 2])
        assert a2.assignment() == a_parts
        assert a2.consumer.memberid() != a_id  # the coordinator gave the instance a new id
        poll_all([a2, b], rounds=10)
        assert generation_of(broker.bootstrap, group, b_id) == generation
        assert log.callbacks("b") == b_callbacks, "b saw a rebalance"
        assert b.assignment() == every - a_parts
        assert log.violations == []
    finally:
        for m in (a, b, a2):
            if m is not None:
                m.close()


def test_duplicate_instance_id_fences_the_older_member(broker: BrokerProcess) -> None:
    topic, group = unique("gfe"), unique("g")
    create_topic(broker.bootstrap, topic, 2)
    every = tps_of(topic, 2)
    old = Member(broker.bootstrap, group, "old", **{"group.instance.id": "twin"})
    old.subscribe([topic])
    new: Member | None = None
    try:
        settle([old], every)
        new = Member(broker.bootstrap, group, "new", **{"group.instance.id": "twin"})
        new.subscribe([topic])

        def fenced() -> bool:
            poll_all([old, new])
            # librdkafka raises FENCED_INSTANCE_ID as a fatal error, naming it in words.
            return any(e.code() == KafkaError.FENCED_INSTANCE_ID or
                       "Static consumer fenced" in e.str() for e in old.errors)

        wait_until(fenced, what="FENCED_INSTANCE_ID on the older member")
        assert any(e.code() == KafkaError._FATAL for e in old.errors)
        settle([new], every)
        assert not new.errors, new.errors
    finally:
        for m in (old, new):
            if m is not None:
                m.close()
