"""Members that fail: one SIGKILLed (evicted by its session timeout) and one that stops
polling past max.poll.interval.ms (librdkafka leaves the group). Their partitions move to
the survivor, which consumes what the failed member left behind."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

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

ROOT = Path(__file__).resolve().parents[2]


def _describe(bootstrap: str, group: str) -> object:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(15)


class Doomed:
    """tests/conformance/group_member.py in a subprocess; tracks its printed assignment."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.conformance.group_member", bootstrap, group, topic,
             str(session_ms)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.assigned: set[int] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("assigned "):
                rest = line.split(" ", 1)[1].strip()
                self.assigned = {int(p) for p in rest.split(",") if p}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_sigkilled_member_is_evicted_by_session_timeout(broker: BrokerProcess) -> None:
    topic, group = unique("gk"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    every = tps_of(topic, 4)
    doomed = Doomed(broker.bootstrap, group, topic, 2000)
    log = OwnershipLog()
    try:
        wait_until(lambda: doomed.assigned == {0, 1, 2, 3}, what="subprocess member assigned")
    except AssertionError:
        doomed.kill()
        raise
    survivor = Member(broker.bootstrap, group, "survivor", log).subscribe([topic])
    try:

        def split() -> bool:
            survivor.poll()
            mine = {p for _, p in survivor.assignment()}
            return len(mine) == 2 and mine.isdisjoint(doomed.assigned) \
                and len(doomed.assigned) == 2

        wait_until(split, what="two members sharing four partitions")
        theirs = set(doomed.assigned)
        described = _describe(broker.bootstrap, group)
        assert len(described.members) == 2  # type: ignore[attr-defined]

        doomed.kill()  # SIGKILL: no LeaveGroup, the coordinator must notice by itself
        log.mark_dead("doomed")
        # Records the dead member never consumed (nor committed) must reach the survivor.
        expected = produce(broker.bootstrap, topic, 4, 5)
        settle([survivor], every, timeout=30)
        described = _describe(broker.bootstrap, group)
        assert [m.client_id for m in described.members] == ["survivor"]  # type: ignore[attr-defined]
        assert described.state.name == "STABLE"  # type: ignore[attr-defined]

        def theirs_consumed() -> bool:
            survivor.poll()
            want = {v for v in expected if int(v.split(b"/")[1]) in theirs}
            return want <= set(survivor.seen)

        wait_until(theirs_consumed, what="the dead member's partitions consumed")
        assert log.violations == []
    finally:
        doomed.kill()
        survivor.close()


def test_member_stalled_past_max_poll_interval_leaves(broker: BrokerProcess) -> None:
    topic, group = unique("gp"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    every = tps_of(topic, 4)
    log = OwnershipLog()
    stalled = Member(broker.bootstrap, group, "stalled", log, **{
        "session.timeout.ms": 1500, "max.poll.interval.ms": 2000}).subscribe([topic])
    busy = Member(broker.bootstrap, group, "busy", log).subscribe([topic])
    try:
        settle([stalled, busy], every, counts=[2, 2])
        # "stalled" stops polling; its heartbeat thread keeps the session alive, so only
        # the poll interval can remove it.
        log.mark_dead("stalled")
        settle([busy], every, timeout=30)  # moved without "stalled" ever polling
        described = _describe(broker.bootstrap, group)
        assert [m.client_id for m in described.members] == ["busy"]  # type: ignore[attr-defined]

        log.dead.discard("stalled")
        wait_until(lambda: (stalled.poll(), bool(stalled.errors))[1], what="stalled error")
        codes = {e.code() for e in stalled.errors}
        assert KafkaError._MAX_POLL_EXCEEDED in codes, stalled.errors
        settle([stalled, busy], every, counts=[2, 2])  # it rejoins once it polls again
        assert log.violations == []
    finally:
        stalled.close()
        busy.close()


def test_every_sigkilled_only_member_is_evicted_in_time(fresh_broker: BrokerProcess) -> None:
    """An idle broker, a 1-partition topic, session.timeout.ms=1000: a group's only member
    is SIGKILLed again and again, and each time the coordinator's session timer must evict it
    within the session timeout + 2 s (a lost timer left dead members in the group for good)."""
    import time

    fresh_broker.start()
    topic, group = unique("gk1"), unique("g")
    create_topic(fresh_broker.bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    late: list[tuple[int, float]] = []
    for trial in range(15):
        doomed = Doomed(fresh_broker.bootstrap, group, topic, 1000)
        try:
            wait_until(lambda d=doomed: d.assigned == {0}, what=f"member {trial} assigned")
        finally:
            doomed.kill()
        killed = time.monotonic()
        deadline = killed + 1.0 + 2.0
        while True:
            described = admin.describe_consumer_groups([group])[group].result(15)
            if not described.members:
                break
            if time.monotonic() > deadline + 5:  # give up well past the bound
                break
            time.sleep(0.05)
        took = time.monotonic() - killed
        if took > 3.0:
            late.append((trial, round(took, 2)))
    assert late == [], f"dead members evicted late or never (trial, seconds): {late}"
