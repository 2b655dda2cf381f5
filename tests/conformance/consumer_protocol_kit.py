"""Helpers for the KIP-848 conformance tests (tests/conformance/test_consumer_protocol*.py).

Members of ``group.protocol=consumer`` groups, seen the way :mod:`tests.conformance.groupkit`
sees classic members (``poll``, ``assignment``, ``positions``), so ``settle`` and ``drain``
work on them unchanged:

* :class:`CpMember`: a confluent-kafka consumer polled by the test thread;
* :class:`JavaCpMember`: Apache Kafka's Java consumer (driver ``ConsumerProtocolMember``);
* ``python -m tests.conformance.consumer_protocol_kit BOOTSTRAP GROUP TOPIC``: a member in a
  process of its own, for tests that SIGKILL it (prints ``assigned p,p,...`` lines).

With the consumer protocol the session timeout and heartbeat interval are the broker's
(``group.consumer.*``); :data:`BROKER_CONFIG` makes them short for tests.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.conformance.groupkit import Member, Tp
from tests.conformance.javakit import Event, JavaKit, tps
from tests.conftest import FAST_GROUPS

ROOT = Path(__file__).resolve().parents[2]

BROKER_CONFIG = {
    **FAST_GROUPS,
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.session.timeout.ms": "4000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
}

#: Sessions long enough for consumer-protocol members to outlive a broker restart.
RESTART_CONFIG = {**BROKER_CONFIG, "group.consumer.session.timeout.ms": "20000",
                  "group.consumer.max.session.timeout.ms": "60000"}

# librdkafka refuses session.timeout.ms, heartbeat.interval.ms and
# partition.assignment.strategy with group.protocol=consumer: they are the broker's.
CONSUMER = {
    "group.protocol": "consumer",
    "max.poll.interval.ms": 10000,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "topic.metadata.refresh.interval.ms": 1000,
    "reconnect.backoff.max.ms": 200,
}


class CpMember(Member):
    """A confluent-kafka member of a consumer-protocol group, polled by the test thread."""

    DEFAULTS = CONSUMER

    def member_id(self) -> str:
        return str(self.consumer.memberid() or "")


def fatal_errors(errors: Sequence[KafkaError]) -> list[KafkaError]:
    """Errors other than the transient ones a member may report while a broker restarts."""
    transient = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._PARTITION_EOF}
    return [e for e in errors if e.code() not in transient]


class JavaCpMember:
    """A ``ConsumerProtocolMember`` driver (Java KafkaConsumer, group.protocol=consumer) seen
    as a groupkit member: its JVM polls by itself, :meth:`poll` only paces the caller."""

    def __init__(self, kit: JavaKit, bootstrap: str, group: str, topics: str, name: str,
                 **config: str) -> None:
        settings = {"client.id": name, "max.poll.interval.ms": "15000",
                    "reconnect.backoff.max.ms": "200", "retry.backoff.max.ms": "300", **config}
        self.name = name
        self.closed = self.closing = False
        self.killed_at: int | None = None
        self.driver = kit.start("ConsumerProtocolMember", bootstrap, group, topics,
                                *(f"{k}={v}" for k, v in settings.items()), name=name)

    def poll(self, timeout: float = 0.02) -> None:
        time.sleep(timeout)

    def rebalances(self) -> list[Event]:
        return [e for e in self.driver.events if e.get("event") in ("assigned", "revoked", "lost")]

    def assignment(self) -> set[Tp]:
        """What the member holds after its latest rebalance callback."""
        events = self.rebalances()
        if not events or self.closed:
            return set()
        last = events[-1]
        held = tps(last["assignment"])
        return held if last["event"] == "assigned" else held - tps(last["partitions"])

    def positions(self) -> dict[Tp, int]:
        return {}

    def epoch(self) -> int:
        assigned = self.driver.of("assigned")
        return int(assigned[-1]["epoch"]) if assigned else -1

    def member_id(self) -> str:
        events = self.rebalances()
        return str(events[-1]["member"]) if events else ""

    def values(self) -> list[str]:
        return [r["value"] for e in self.driver.of("records") for r in e["records"] or []]

    def errors(self) -> list[Event]:
        return self.driver.of("error")

    def commit(self) -> Event:
        return self.driver.request("commit")

    def close(self) -> None:
        """KafkaConsumer.close(): a dynamic member leaves (epoch -1), a static one -2."""
        self.start_close()
        self.wait_closed()

    def start_close(self) -> None:
        """Ask for close() and return at once (:meth:`wait_closed` waits for it), so that
        several members close at the same time."""
        if not self.closed:
            self.closed = self.closing = True
            self.driver.send("close")

    def wait_closed(self) -> None:
        if self.closing:
            self.closing = False
            self.driver.wait_for(lambda e: e["event"] == "closed", 30, "closed")
            assert self.driver.close() == 0

    def kill(self) -> None:
        self.closed = True
        self.killed_at = int(time.time() * 1000)
        self.driver.kill()


class Reporting(Protocol):
    """A member whose rebalance callbacks are events with ``ts`` (wall-clock ms)."""

    name: str
    killed_at: int | None

    def rebalances(self) -> list[Event]: ...


def double_owners(members: Sequence[Reporting], fenced: list[str] | None = None) -> list[str]:
    """Times a partition was assigned to a member while another live member still held it.

    The members' callbacks are replayed in wall-clock order (``ts``, one machine); on a tie
    a revocation counts first. A killed member holds nothing once it was killed.

    With ``fenced`` (a list to fill), an overlap whose earlier holder later learns it *lost*
    the partition (its next callback for it is ``lost``: the coordinator had fenced it, its
    session having expired while it could not reach the coordinator) is Kafka's documented
    zombie window (``onPartitionsLost``: the partitions "may already be owned by other
    members"), not a coordinator fault: it goes to ``fenced`` instead of the result. An
    overlap the earlier holder ends by revoking is always a fault.
    """
    killed = {m.name: m.killed_at for m in members if m.killed_at is not None}
    timeline: list[tuple[int, int, str, str, set[Tp]]] = []
    for m in members:
        for e in m.rebalances():
            kind = e["event"]
            parts = tps(e["partitions"])
            timeline.append((int(e["ts"]), 0 if kind != "assigned" else 1, m.name, kind, parts))
    timeline.sort(key=lambda x: (x[0], x[1]))

    def lost_later(holder: str, tp: Tp, after: int) -> bool:
        for _ts, _, name, kind, parts in timeline[after + 1:]:
            if name == holder and tp in parts:
                return kind == "lost"
        return False

    owner: dict[Tp, str] = {}
    bad = []
    for i, (ts, _, name, kind, parts) in enumerate(timeline):
        for tp in parts:
            if kind == "assigned":
                other = owner.get(tp)
                gone = other in killed and killed[other] <= ts
                if other is not None and other != name and not gone:
                    what = f"{tp} assigned to {name} at {ts} while {other} held it"
                    if fenced is not None and lost_later(other, tp, i):
                        fenced.append(what)
                    else:
                        bad.append(what)
                owner[tp] = name
            elif owner.get(tp) == name:
                del owner[tp]
    return bad


class ProcessMember:
    """A confluent-kafka consumer-protocol member in its own process (to be SIGKILLed)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.conformance.consumer_protocol_kit", bootstrap, group,
             topic], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        self.assigned: list[set[int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("assigned "):
                parts = line.split()[1:]
                self.assigned.append({int(p) for p in parts[0].split(",")} if parts else set())

    def holds(self) -> set[int]:
        return self.assigned[-1] if self.assigned else set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "doomed",
                  **CONSUMER})
    c.subscribe([topic])
    last: list[int] | None = None
    deadline = time.monotonic() + 120  # a bound for stray processes
    while time.monotonic() < deadline:
        c.consume(100, timeout=0.05)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            last = now
            print("assigned " + ",".join(map(str, now)), flush=True)


def topic_partitions(pairs: Sequence[tuple[str, int]]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, p in pairs]


if __name__ == "__main__":
    main()
