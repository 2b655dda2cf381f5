"""KIP-848 groups shared with other members: a samsa consumer-protocol member beside a
confluent-kafka (librdkafka) ``group.protocol=consumer`` member, and a samsa classic member
beside a samsa consumer-protocol member (the broker migrates the group online: it becomes a
consumer group when the consumer-protocol member joins, and classic again when it leaves)."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaException

from samsa import TopicPartition
from samsa.client import Admin, Consumer
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.cpgroups import commits_equal_end_offsets, cp_consumer, describe, produce, split
from tests.client.runner import Runner
from tests.conformance.consumer_protocol_kit import CONSUMER

pytestmark = [pytest.mark.slow, pytest.mark.conformance]
_groups = itertools.count()


class CkCpRunner(threading.Thread):
    """A confluent-kafka ``group.protocol=consumer`` member that commits after every
    message, polled by its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = CkConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                    **CONSUMER})
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.values: list[bytes] = []
        self.stopped = threading.Event()
        self.consumer.subscribe([topic])

    def run(self) -> None:
        while not self.stopped.is_set():
            msg = self.consumer.poll(0.1)
            self.assignment = frozenset(TopicPartition(p.topic, p.partition)
                                        for p in self.consumer.assignment())
            if msg is None or msg.error():
                continue
            self.values.append(msg.value())
            with contextlib.suppress(KafkaException):
                self.consumer.commit(message=msg, asynchronous=False)
        self.consumer.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(20)


def test_samsa_and_librdkafka_consumer_protocol_members(
        cp_broker: BrokerProcess, cp_topic: Callable[[int], str],
        runners: list[Runner]) -> None:
    topic, group = cp_topic(6), f"cp-mixed-{next(_groups)}"
    parts = {TopicPartition(topic, p) for p in range(6)}
    ours = [Runner(cp_consumer(cp_broker, group), [topic], commit=True) for _ in range(2)]
    runners.extend(ours)
    theirs = CkCpRunner(cp_broker.bootstrap, group, topic)
    try:
        for r in ours:
            r.start()
        theirs.start()

        def shared() -> bool:
            owned = [tp for r in ours for tp in r.assignment] + list(theirs.assignment)
            return (split(ours, set(parts) - theirs.assignment) and len(owned) == 6
                    and set(owned) == parts and bool(theirs.assignment))

        wait_until(shared, 60, describe=lambda: (describe(ours), sorted(theirs.assignment)))
        time.sleep(1.0)  # let librdkafka settle its fetch positions
        expected = produce(cp_broker, topic, 300, "m")
        got = lambda: [r.value for o in ours for r in o.records] + theirs.values  # noqa: E731
        wait_until(lambda: len(got()) >= len(expected), 60)
        time.sleep(0.5)
        assert sorted(got()) == sorted(expected), "every record consumed exactly once"
        assert all(r.records for r in ours) and theirs.values
        wait_until(lambda: commits_equal_end_offsets(cp_broker, group, parts), 20)
        with Admin(bootstrap_servers=cp_broker.bootstrap) as admin:
            desc = admin.describe_groups([group])[group]
            assert len(desc.members) == 3
        # The librdkafka member leaves: samsa's members take its partitions over.
        theirs.stop()
        wait_until(lambda: split(ours, parts), 30, describe=lambda: describe(ours))
    finally:
        if theirs.is_alive():
            theirs.stop()


def test_classic_and_consumer_protocol_members_in_one_group(
        cp_broker: BrokerProcess, cp_topic: Callable[[int], str],
        runners: list[Runner]) -> None:
    """A live classic group gains a consumer-protocol member (the group converts), both
    consume, and when the consumer-protocol member leaves the classic member gets
    everything back; no record is lost and the commits equal the end offsets."""
    topic, group = cp_topic(4), f"cp-migrate-{next(_groups)}"
    parts = {TopicPartition(topic, p) for p in range(4)}
    classic_cfg: dict[str, Any] = {
        "bootstrap_servers": cp_broker.bootstrap, "group_id": group,
        "auto_offset_reset": "earliest", "enable_auto_commit": False,
        "session_timeout_ms": 6000, "heartbeat_interval_ms": 200,
        "max_poll_interval_ms": 20000, "metadata_max_age_ms": 1000,
        "partition_assignment_strategy": ["cooperative-sticky"]}
    classic = Runner(Consumer(**classic_cfg), [topic], commit=True)
    runners.append(classic)
    classic.start()
    wait_until(lambda: split([classic], parts), 30, describe=lambda: describe([classic]))
    expected = produce(cp_broker, topic, 100, "before")
    wait_until(lambda: len(classic.records) >= 100, 30)

    modern = Runner(cp_consumer(cp_broker, group), [topic], commit=True)
    runners.append(modern)
    modern.start()
    wait_until(lambda: split([classic, modern], parts), 60,
               describe=lambda: describe([classic, modern]))
    with Admin(bootstrap_servers=cp_broker.bootstrap) as admin:
        assert admin.list_groups().get(group) is not None
        desc = admin.describe_groups([group])[group]
        assert len(desc.members) == 2
    expected |= produce(cp_broker, topic, 100, "during")
    seen = lambda: {r.value for x in (classic, modern) for r in x.records}  # noqa: E731
    wait_until(lambda: seen() >= expected, 30)
    assert modern.records, "the consumer-protocol member consumed its share"

    modern.stop()  # leaves with epoch -1: the group converts back to classic
    wait_until(lambda: split([classic], parts), 30, describe=lambda: describe([classic]))
    expected |= produce(cp_broker, topic, 100, "after")
    wait_until(lambda: seen() >= expected, 30)
    assert seen() == expected
    classic.consumer.commit()
    wait_until(lambda: commits_equal_end_offsets(cp_broker, group, parts), 20)
    assert classic.error is None and modern.error is None
