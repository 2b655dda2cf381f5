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
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client import KafkaError, Producer
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


class Feeder(threading.Thread):
    """Produces one record to every partition of ``topic`` every ``period`` seconds."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 period: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(bootstrap_servers=bootstrap, linger_ms=0)
        self.topic, self.partitions, self.period = topic, partitions, period
        self.stopped = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            for p in range(self.partitions):
                self.producer.send(self.topic, value=b"%d" % i, partition=p)
            i += 1
            self.stopped.wait(self.period)

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
        self.producer.close(10)


POLL_MS = 200
POLL_SLACK_S = 1.0
"""A behaviour bound, not a speed figure: ``poll(200)`` must come back by its deadline,
not after the parked join (seconds later); the slack absorbs a loaded machine."""


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_poll_keeps_its_deadline_while_the_join_is_parked(broker: BrokerProcess,
                                                         topic: Callable[[int], str],
                                                         strategy: str,
                                                         runners: list[Runner]) -> None:
    """A librdkafka member stops polling while a third member joins. librdkafka waits for
    its application to revoke partitions (eager: all of them, before it rejoins;
    cooperative: those the first phase moved, before the second), so the coordinator
    parks the other JoinGroups until that member's max.poll.interval.ms makes it leave.
    ``poll(200)`` of the samsa member returns by its deadline every time; a cooperative
    member keeps returning records of the partitions it keeps (KIP-429), an eager one has
    revoked everything and returns nothing."""
    cooperative = strategy == "cooperative-sticky"
    t = topic(4)
    parts = {TopicPartition(t, p) for p in range(4)}
    group = f"parked-{strategy}-{next(_groups)}"
    theirs = CkConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 200, "max.poll.interval.ms": 6000})
    theirs_owned: set[TopicPartition] = set()

    def on_assign(c: Any, ps: list[Any]) -> None:
        theirs_owned.update(TopicPartition(p.topic, p.partition) for p in ps)
        if cooperative:
            c.incremental_assign(ps)

    def on_revoke(c: Any, ps: list[Any]) -> None:
        theirs_owned.difference_update(TopicPartition(p.topic, p.partition) for p in ps)
        if cooperative:
            c.incremental_unassign(ps)

    theirs.subscribe([t], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    ours = make(broker, group, partition_assignment_strategy=[strategy],
                enable_auto_commit=False, max_poll_interval_ms=20000)
    ours.subscribe([t])
    feeder = Feeder(broker.bootstrap, t, 4)
    try:
        def split() -> bool:
            theirs.poll(0.05)
            ours.poll(50)
            mine = ours.assignment()
            return (ours.member_state == "STABLE" and not ours.rejoin_pending and
                    len(mine) == 2 and mine | theirs_owned == parts and
                    not mine & theirs_owned)

        wait_until(split, timeout=60)
        feeder.start()
        # librdkafka stops polling; a third member joins.
        third = Runner(make(broker, group, partition_assignment_strategy=[strategy],
                            enable_auto_commit=False), [t])
        runners.append(third)
        third.start()
        slowest = 0.0
        parked: list[tuple[set[TopicPartition], set[TopicPartition]]] = []
        """(assignment, partitions of the records returned) of each poll while parked."""
        refused: list[int] = []
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            start = time.monotonic()
            got = ours.poll(POLL_MS)
            slowest = max(slowest, time.monotonic() - start)
            if ours.member_state == "REBALANCING":
                parked.append((ours.assignment(),
                               {TopicPartition(r.topic, r.partition) for r in got}))
                if got and not refused:
                    # A commit now would wait behind the parked JoinGroup: it fails at
                    # once, as Kafka's RebalanceInProgressException.
                    with pytest.raises(KafkaError) as info:
                        ours.commit()
                    refused.append(info.value.code)
                    slowest = max(slowest, time.monotonic() - start)
            if third.stable() and ours.member_state == "STABLE" and \
                    not ours.rejoin_pending and parked:
                break
        assert slowest < POLL_MS / 1000 + POLL_SLACK_S, f"poll(200) took {slowest:.1f}s"
        # The join stayed parked for seconds (until librdkafka's max.poll.interval.ms).
        assert len(parked) >= 10, len(parked)
        if cooperative:
            # It keeps some partitions through the rebalance (the first phase may already
            # have revoked one: librdkafka rejoins that one on its own, then waits for the
            # application to revoke before the second) and returns their records only.
            assert all(owned and got <= owned for owned, got in parked), parked
            assert any(got for _, got in parked), "no records during the rebalance"
            assert refused == [ErrorCode.rebalance_in_progress]
        else:
            assert all(not owned and not got for owned, got in parked), parked
        def settled() -> bool:  # librdkafka left: the two samsa members share the topic
            ours.poll(50)
            mine, other = ours.assignment(), set(third.assignment)
            return third.stable() and mine | other == parts and not mine & other

        wait_until(settled, timeout=30)
    finally:
        feeder.stop()
        ours.close()
        theirs.close()
