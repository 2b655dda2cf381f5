"""Mixed groups: samsa consumers and confluent-kafka (librdkafka) consumers in one group."""

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
from samsa.client import Producer
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.runner import Runner
from tests.client.test_groups import make

pytestmark = [pytest.mark.slow, pytest.mark.conformance]
_groups = itertools.count()


class CkRunner(threading.Thread):
    """A confluent-kafka consumer that commits synchronously after every message."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        super().__init__(daemon=True)
        self.consumer = CkConsumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200, "topic.metadata.refresh.interval.ms": 1000})
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.records: list[tuple[int, int]] = []
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        cooperative = strategy == "cooperative-sticky"

        def on_assign(c: Any, parts: list[Any]) -> None:
            with self.lock:
                new = {TopicPartition(p.topic, p.partition) for p in parts}
                self.assignment = frozenset(self.assignment | new if cooperative else new)
            if cooperative:
                c.incremental_assign(parts)

        def on_revoke(c: Any, parts: list[Any]) -> None:
            with self.lock:
                gone = {TopicPartition(p.topic, p.partition) for p in parts}
                self.assignment = frozenset(self.assignment - gone)
            if cooperative:
                c.incremental_unassign(parts)

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def run(self) -> None:
        while not self.stopped.is_set():
            msg = self.consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            self.records.append((msg.partition(), msg.offset()))
            with contextlib.suppress(KafkaException):
                self.consumer.commit(message=msg, asynchronous=False)
        self.consumer.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_samsa_and_librdkafka_share_a_group(broker: BrokerProcess,
                                            topic: Callable[[int], str],
                                            strategy: str) -> None:
    t = topic(8)
    group = f"mixed-{strategy}-{next(_groups)}"
    parts = {TopicPartition(t, p) for p in range(8)}
    ours = [Runner(make(broker, group, partition_assignment_strategy=[strategy],
                        enable_auto_commit=False), [t], commit=True) for _ in range(2)]
    theirs = [CkRunner(broker.bootstrap, group, t, strategy) for _ in range(2)]
    try:
        for r in [*ours, *theirs]:
            r.start()

        def split() -> bool:
            owned = [tp for r in [*ours, *theirs] for tp in r.assignment]
            return (len(owned) == len(set(owned)) == 8 and set(owned) == parts
                    and all(r.assignment for r in [*ours, *theirs])
                    and all(r.stable() for r in ours))

        wait_until(split, timeout=60)
        time.sleep(1.0)  # let librdkafka settle its fetch positions
        n = 400
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            for i in range(n):
                p.send(t, value=b"%d" % i, key=b"k%d" % i)
        consumed = lambda: [(r.partition, r.offset) for o in ours for r in o.records] + \
            [rec for c in theirs for rec in c.records]  # noqa: E731
        wait_until(lambda: len(consumed()) >= n, timeout=60)
        time.sleep(0.5)
        got = consumed()
        assert len(got) == len(set(got)) == n, "every record consumed exactly once"
        assert all(r.records for r in ours) and all(c.records for c in theirs)
    finally:
        for c in theirs:
            c.stopped.set()
            c.join(20)
        for r in ours:
            r.stop()
