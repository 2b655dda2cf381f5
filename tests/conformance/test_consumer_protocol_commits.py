"""Offset commits of KIP-848 ``consumer`` groups while they rebalance (KIP-1251).

Apache Kafka's Java consumer 4.3 is written against brokers that accept a commit whose
member epoch lags the broker's by a heartbeat, as long as each partition was assigned to the
member at that epoch or before (``assignmentEpoch <= clientEpoch <= brokerEpoch``). Members
that ``commitSync()`` after every batch and in ``onPartitionsRevoked`` while members leave
and join must never see a ``CommitFailedException`` (STALE_MEMBER_EPOCH), and a partition
that moved must still be fenced. The same with librdkafka (confluent-kafka) members that
commit in their revoke callback.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import BROKER_CONFIG, JavaCpMember, double_owners
from tests.conformance.groupkit import create_topic, settle, tps_of, unique, wait_until
from tests.conformance.javakit import JavaKit

pytestmark = pytest.mark.conformance

PARTS = 6
RUNS = 5


@pytest.fixture(scope="module")
def cp_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("cpc") / "data", BROKER_CONFIG).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


class Trickle:
    """Records produced to every partition, a few at a time, until stopped: the members
    keep polling batches (and committing them) while the group rebalances."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            for p in range(PARTS):
                self.producer.produce(self.topic, value=f"{self.sent}".encode(), partition=p)
                self.sent += 1
            self.producer.poll(0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(15) == 0


def _commit_failures(members: list[JavaCpMember]) -> list[str]:
    return [f"{m.name} ({e.get('where')}): {e['error']}" for m in members for e in m.errors()]


def _one_run(bootstrap: str, java: JavaKit) -> list[str]:
    """Three members commit after every batch and on revocation; one leaves, one joins."""
    topic, group = unique("jkc"), unique("g")
    create_topic(bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    trickle = Trickle(bootstrap, topic)
    settings = {"driver.commitOnRevoke": "true", "driver.commitEachBatch": "true",
                "driver.records": "false", "max.poll.records": "5"}

    def member(name: str) -> JavaCpMember:
        return JavaCpMember(java, bootstrap, group, topic, name, **settings)

    a, b, c = member("a"), member("b"), member("c")
    settle([a, b, c], every, counts=[2, 2, 2], timeout=45)
    b.close()
    d = member("d")
    settle([a, c, d], every, counts=[2, 2, 2], timeout=45)
    trickle.stop()
    members = [a, b, c, d]
    wait_until(lambda: all(m.driver.of("committed") for m in (a, c, d)),
               what="every member's batch commits")
    failures = _commit_failures(members)
    assert double_owners(members) == []
    for m in (a, c, d):
        m.close()
    return failures


@pytest.mark.slow
def test_java_members_commit_while_members_leave_and_join(cp_broker: BrokerProcess,
                                                            java: JavaKit) -> None:
    failures = {}
    for run in range(RUNS):
        bad = _one_run(cp_broker.bootstrap, java)
        if bad:
            failures[run] = bad
    assert failures == {}, failures
