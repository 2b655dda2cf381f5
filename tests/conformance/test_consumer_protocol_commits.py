"""Offset commits of KIP-848 ``consumer`` groups while they rebalance (KIP-1251).

Apache Kafka's Java consumer 4.3 is written against brokers that accept a commit whose
member epoch lags the broker's by a heartbeat, as long as each partition was assigned to the
member at that epoch or before (``assignmentEpoch <= clientEpoch <= brokerEpoch``). Members
that ``commitSync()`` after every batch and in ``onPartitionsRevoked`` while members leave
and join must never see a ``CommitFailedException`` (STALE_MEMBER_EPOCH); before samsa
checked assignment epochs, most runs of that scenario did. The same with librdkafka
(confluent-kafka) members that commit in their revoke callback. That a partition which
moved to another member is still fenced is checked on the fake clock
(tests/coordinator/test_consumer_commits.py).
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import (
    CpMember,
    JavaCpMember,
    double_owners,
)
from tests.conformance.groupkit import (
    OwnershipLog,
    create_topic,
    poll_all,
    settle,
    tps_of,
    unique,
    wait_until,
)
from tests.conformance.javakit import JavaKit

pytestmark = pytest.mark.conformance

PARTS = 6
RUNS = 20


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


def _errors(members: list[JavaCpMember]) -> list[str]:
    """The errors the members reported: failed commits ("where": batch or revoked) and
    failed polls."""
    return [f"{m.name} ({e.get('where')}): {e['error']}" for m in members for e in m.errors()]


def _commits(members: list[JavaCpMember], where: str) -> int:
    return sum(1 for m in members for e in m.driver.of("committed") if e["where"] == where)


def _one_run(bootstrap: str, java: JavaKit) -> list[str]:
    """Three members commit after every batch and on revocation; one leaves while another
    joins. Returns the errors they reported."""
    topic, group = unique("jkc"), unique("g")
    create_topic(bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    settings = {"driver.commitOnRevoke": "true", "driver.commitEachBatch": "true",
                "driver.records": "false", "max.poll.records": "5"}

    def member(name: str) -> JavaCpMember:
        return JavaCpMember(java, bootstrap, group, topic, name, **settings)

    trickle = Trickle(bootstrap, topic)
    try:
        a, b, c = member("a"), member("b"), member("c")
        settle([a, b, c], every, counts=[2, 2, 2], timeout=45)
        b.start_close()  # b leaves while d joins
        d = member("d")
        b.wait_closed()
        settle([a, c, d], every, counts=[2, 2, 2], timeout=45)
    finally:
        trickle.stop()
    members = [a, b, c, d]
    wait_until(lambda: all(m.driver.of("committed") for m in (a, c, d)),
               what="every member's batch commits")
    for m in (a, c, d):
        m.start_close()
    for m in (a, c, d):
        m.wait_closed()
    # the commits ran: after batches, and in onPartitionsRevoked (b's close, the partitions
    # a and c handed to d, the last closes)
    assert _commits(members, "batch") > 0 and _commits(members, "revoked") > 0
    assert double_owners(members) == []
    return _errors(members)


@pytest.mark.slow
@pytest.mark.timeout(600)  # a bound for a loaded machine; it takes about 2 minutes
def test_java_members_commit_while_members_leave_and_join(cp_broker: BrokerProcess,
                                                            java: JavaKit) -> None:
    """The issue's judge: :func:`_one_run` 20 times in a row, no error in any."""
    failures = {}
    for run in range(RUNS):
        bad = _one_run(cp_broker.bootstrap, java)
        if bad:
            failures[run] = bad
    assert failures == {}, failures


@pytest.mark.slow
def test_librdkafka_members_commit_in_the_revoke_callback(cp_broker: BrokerProcess) -> None:
    """The same with confluent-kafka (librdkafka) members polled by the test thread: a
    synchronous commit after every batch and in the revoke callback, b leaves while d
    joins. Every commit is accepted and no partition has two owners."""
    bootstrap = cp_broker.bootstrap
    topic, group = unique("rkc"), unique("g")
    create_topic(bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    log = OwnershipLog()
    members: list[CpMember] = []

    def member(name: str) -> CpMember:
        members.append(CpMember(bootstrap, group, name, log).subscribe(
            [topic], commit_on_revoke=True, commit_each_batch=True))
        return members[-1]

    trickle = Trickle(bootstrap, topic)
    try:
        a, b, c = member("a"), member("b"), member("c")
        settle([a, b, c], every, counts=[2, 2, 2], timeout=45)
        poll_all([a, b, c], rounds=20)
        b.close()  # revokes (and commits) what it holds, then leaves
        d = member("d")
        settle([a, c, d], every, counts=[2, 2, 2], timeout=45)
        poll_all([a, c, d], rounds=20)
    finally:
        trickle.stop()
        for m in members:
            m.close()  # the last ones revoke (and commit) too
    assert [(m.name, w, e.str()) for m in members for w, e in m.commit_errors] == []
    assert sum(m.commits["batch"] for m in members) > 0
    assert sum(m.commits["revoke"] for m in members) > 0
    assert log.violations == []
