"""The coordinator node of a group SIGKILLed under real clients, on the PostgreSQL cluster
(tests/cluster/test_cluster_failover.py, and the failover rows of benchmarks/cluster.py).

Members of one client library and group protocol: confluent-kafka (librdkafka), Apache Kafka's
Java client 4.3 (drivers ``Member`` and ``ConsumerProtocolMember``) and ``samsa.Consumer``,
each with ``classic`` or ``consumer`` (KIP-848). Every member reports the same things: its
rebalance callbacks as events (``assigned`` / ``revoked`` / ``lost``, the partitions, ``ts``
in wall-clock ms, as the Java drivers print them, so :func:`double_owners` replays them all),
what it consumed and when, and its errors.

:func:`run` produces records, lets the members settle, kills the node coordinating the group
(``stable``: a settled group; ``reconcile``: right after a third member joined, while the
group rebalances), produces again and measures the failover: seconds from the kill until the
group is seen Stable with every partition assigned *and* every partition delivered a record
produced after the kill. The killed node is then restarted and handed its share back (the
group's shard moves again, by hand-off, under the same members), and more records are
produced. It returns what the test asserts: every acknowledged record consumed, commits equal
to the end offsets, no partition owned twice at once (unless its earlier holder had been
fenced and was told so: see :func:`~tests.conformance.consumer_protocol_kit.double_owners`),
no fatal error.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import GroupId
from kio.static.primitive import i8

from samsa import TopicPartition as SamsaTp
from samsa.assignors.codec import decode_assignment
from samsa.broker.topics import OFFSETS_TOPIC
from samsa.client import Consumer as SamsaConsumer
from samsa.client import KafkaError as SamsaError
from samsa.client import WakeupError
from samsa.coordinator.hashing import partition_for
from tests.cluster.nodes import wait_until
from tests.cluster.test_cluster_clients import (
    PARTITIONS,
    TOPIC,
    Cluster,
    consumer,
    end_offsets,
    group_state,
    produce,
)
from tests.conformance.consumer_protocol_kit import JavaCpMember, double_owners
from tests.conformance.javakit import Event, JavaKit, JavaMember
from tests.wire import call_once

CLIENTS = ("librdkafka", "java", "samsa")
PROTOCOLS = ("classic", "consumer")
MOMENTS = ("stable", "reconcile")

#: Broker settings of the failover cluster: consumer-protocol sessions outlive a failover
#: and the hand-back on a loaded machine (librdkafka was seen to take 19 s to find the
#: restarted coordinator after a NOT_COORDINATOR); heartbeats a second apart keep a
#: reconciliation visible long enough to kill the coordinator in the middle of it.
CLUSTER_CONFIG = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.session.timeout.ms": "30000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
#: Classic members: the same session, heartbeats a second apart.
SESSION_MS, HEARTBEAT_MS = 10_000, 1000


def now_ms() -> int:
    return int(time.time() * 1000)


class FailoverMember(Protocol):
    name: str
    killed_at: int | None

    def rebalances(self) -> list[Event]: ...

    def consumed(self) -> dict[str, tuple[int, int]]:
        """Value -> (partition, wall-clock ms when first consumed)."""
        ...

    def fatal(self) -> list[str]: ...

    def errors(self) -> list[str]: ...

    def commit(self) -> bool:
        """Commit the consumed positions now; False if it failed (retry later)."""
        ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------- Python clients


class _Polled(threading.Thread):
    """A Python client polled by a thread of its own, which also commits what it consumed
    (after each batch, and again every half second until a commit goes through)."""

    def __init__(self, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.name = name
        self.killed_at: int | None = None
        self.lock = threading.Lock()
        self.events: list[Event] = []
        self.got: dict[str, tuple[int, int]] = {}
        self.errs: list[str] = []
        self.fatals: list[str] = []
        self.stopping = threading.Event()
        self._commit_asked = threading.Event()
        self._committed = threading.Event()
        self._commit_ok = False
        self._dirty = False
        self._last_commit = 0.0

    # listener calls and records, from the polling thread
    def on_rebalance(self, kind: str, parts: list[tuple[str, int]]) -> None:
        with self.lock:
            self.events.append({"event": kind, "ts": now_ms(),
                                "partitions": [list(tp) for tp in sorted(parts)]})

    def on_record(self, value: bytes, partition: int) -> None:
        with self.lock:
            self.got.setdefault(value.decode(), (partition, now_ms()))
            self._dirty = True

    def on_error(self, text: str, fatal: bool) -> None:
        with self.lock:
            (self.fatals if fatal else self.errs).append(text)

    # FailoverMember
    def rebalances(self) -> list[Event]:
        with self.lock:
            return list(self.events)

    def consumed(self) -> dict[str, tuple[int, int]]:
        with self.lock:
            return dict(self.got)

    def fatal(self) -> list[str]:
        with self.lock:
            return list(self.fatals)

    def errors(self) -> list[str]:
        with self.lock:
            return list(self.errs)

    def commit(self) -> bool:
        self._committed.clear()
        self._commit_asked.set()
        return self._committed.wait(30) and self._commit_ok

    def close(self) -> None:
        self.stopping.set()
        self.join(60)

    # the polling thread
    def run(self) -> None:
        try:
            while not self.stopping.is_set() and not self.fatal():
                self.poll_once()
                asked = self._commit_asked.is_set()
                due = self._dirty and time.monotonic() - self._last_commit > 0.5
                if asked or due:
                    self._last_commit = time.monotonic()
                    ok = self.commit_positions()
                    if ok:
                        self._dirty = False
                    if asked:
                        self._commit_asked.clear()
                        self._commit_ok = ok
                        self._committed.set()
        except Exception as exc:  # any escape is the member failing
            self.on_error(f"{type(exc).__name__}: {exc}", fatal=True)
        finally:
            self.shut()

    def poll_once(self) -> None:
        raise NotImplementedError

    def commit_positions(self) -> bool:
        raise NotImplementedError

    def shut(self) -> None:
        raise NotImplementedError


class RdkafkaMember(_Polled):
    """A confluent-kafka consumer, classic (range/roundrobin, eager) or consumer protocol."""

    def __init__(self, bootstrap: str, group: str, name: str, protocol: str) -> None:
        super().__init__(name)
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 200,
            "error_cb": self._error}
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
        self.consumer = RdConsumer(conf)
        self.consumer.subscribe(
            [TOPIC],
            on_assign=lambda _c, ps: self.on_rebalance("assigned", _pairs(ps)),
            on_revoke=lambda _c, ps: self.on_rebalance("revoked", _pairs(ps)),
            on_lost=lambda _c, ps: self.on_rebalance("lost", _pairs(ps)))
        self.start()

    def _error(self, err: KafkaError) -> None:
        self.on_error(str(err), err.fatal())

    def poll_once(self) -> None:
        for m in self.consumer.consume(100, timeout=0.1):
            err = m.error()
            if err is None:
                self.on_record(m.value(), m.partition())
            elif err.code() != KafkaError._PARTITION_EOF:
                self._error(err)

    def commit_positions(self) -> bool:
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                self._error(err)
            elif err.code() != KafkaError._NO_OFFSET:
                self.on_error(f"commit: {err}", fatal=False)
            return bool(err.code() == KafkaError._NO_OFFSET)
        return True

    def shut(self) -> None:
        with contextlib.suppress(Exception):
            self.consumer.close()


class _Listener:
    def __init__(self, member: _Polled) -> None:
        self.member = member

    def on_partitions_revoked(self, revoked: set[SamsaTp]) -> None:
        self.member.on_rebalance("revoked", [(tp.topic, tp.partition) for tp in revoked])

    def on_partitions_assigned(self, assigned: set[SamsaTp]) -> None:
        self.member.on_rebalance("assigned", [(tp.topic, tp.partition) for tp in assigned])

    def on_partitions_lost(self, lost: set[SamsaTp]) -> None:
        self.member.on_rebalance("lost", [(tp.topic, tp.partition) for tp in lost])


class SamsaMember(_Polled):
    """A ``samsa.Consumer``, classic (its default assignors) or ``group_protocol="consumer"``."""

    def __init__(self, bootstrap: str, group: str, name: str, protocol: str) -> None:
        super().__init__(name)
        conf: dict[str, Any] = {
            "bootstrap_servers": bootstrap, "group_id": group, "client_id": name,
            "group_protocol": protocol, "auto_offset_reset": "earliest",
            "enable_auto_commit": False, "metadata_max_age_ms": 1000,
            "max_poll_interval_ms": 30_000}
        if protocol == "classic":
            conf.update(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        self.consumer = SamsaConsumer(**conf)
        self.consumer.subscribe([TOPIC], listener=_Listener(self))
        self.start()

    def poll_once(self) -> None:
        try:
            records = self.consumer.poll(100)
        except WakeupError:
            return
        except SamsaError as exc:
            self.on_error(f"{exc.name}: {exc}", fatal=not exc.retriable)
            return
        for r in records:
            self.on_record(r.value, r.partition)

    def commit_positions(self) -> bool:
        try:
            self.consumer.commit()
        except SamsaError as exc:  # CommitFailedError, a coordinator moving: retried
            self.on_error(f"commit: {exc.name}: {exc}", fatal=False)
            return False
        return True

    def close(self) -> None:
        self.stopping.set()
        self.consumer.wakeup()
        self.join(60)

    def shut(self) -> None:
        with contextlib.suppress(Exception):
            self.consumer.close(autocommit=False)


def _pairs(parts: list[TopicPartition]) -> list[tuple[str, int]]:
    return [(p.topic, p.partition) for p in parts]


# ---------------------------------------------------------------------- Java


class JavaFailoverMember:
    """A Java driver (classic ``Member`` or ``ConsumerProtocolMember``) as a FailoverMember."""

    def __init__(self, kit: JavaKit, bootstrap: str, group: str, name: str,
                 protocol: str) -> None:
        self.name = name
        self.killed_at: int | None = None
        self.member: JavaMember | JavaCpMember
        if protocol == "consumer":
            self.member = JavaCpMember(kit, bootstrap, group, TOPIC, name)
        else:
            self.member = JavaMember(kit, bootstrap, group, [TOPIC], name,
                                     **{"auto.offset.reset": "earliest",
                                        "enable.auto.commit": "false",
                                        "session.timeout.ms": str(SESSION_MS),
                                        "heartbeat.interval.ms": str(HEARTBEAT_MS),
                                        "max.poll.interval.ms": "30000"})

    def rebalances(self) -> list[Event]:
        return self.member.rebalances()

    def consumed(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for e in self.member.driver.of("records"):
            for r in e["records"] or []:
                out.setdefault(r["value"], (int(r["partition"]), int(e["ts"])))
        return out

    def errors(self) -> list[str]:
        return [str(e.get("error")) for e in self.member.errors()]

    def fatal(self) -> list[str]:
        dead = [] if self.member.driver.alive() or self.member.closed else ["the JVM exited"]
        return dead + [str(e.get("error")) for e in self.member.errors() if e.get("fatal")]

    def commit(self) -> bool:
        return bool(self.member.commit().get("ok"))

    def close(self) -> None:
        self.member.close()


def member(kind: tuple[str, str], bootstrap: str, group: str, name: str,
           java: Callable[[], JavaKit]) -> FailoverMember:
    client, protocol = kind
    if client == "librdkafka":
        return RdkafkaMember(bootstrap, group, name, protocol)
    if client == "samsa":
        return SamsaMember(bootstrap, group, name, protocol)
    return JavaFailoverMember(java(), bootstrap, group, name, protocol)


# ---------------------------------------------------------------- the group, seen from outside


def consumer_group_state(bootstrap: str, group: str) -> tuple[str, int, bool]:
    """A consumer-protocol group as one node describes it (ConsumerGroupDescribe v0): its
    state, its member count, and whether every member has reached its target assignment."""
    g = call_once(bootstrap, 69, 0, ConsumerGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False)).groups[0]
    reached = all(
        {(t.topic_id, tuple(t.partitions)) for t in m.assignment.topic_partitions}
        == {(t.topic_id, tuple(t.partitions)) for t in m.target_assignment.topic_partitions}
        for m in g.members)
    return str(g.group_state), len(g.members), reached


def stable_and_assigned(cluster: Cluster, group: str, protocol: str) -> bool:
    """The coordinator (as a live node's FindCoordinator names it) describes the group as
    Stable, its members' assignments splitting every partition exactly."""
    live = [n for n in cluster.nodes.values() if n.alive()]
    try:
        found = call_once(live[0].bootstrap, 10, 4, FindCoordinatorRequest(
            key_type=i8(0), coordinator_keys=(group,))).coordinators[0]
        node = cluster.nodes.get(int(found.node_id))
        if found.error_code != ErrorCode.none or node is None or not node.alive():
            return False
        if protocol == "consumer":
            g = call_once(node.bootstrap, 69, 0, ConsumerGroupDescribeRequest(
                group_ids=(GroupId(group),), include_authorized_operations=False)).groups[0]
            held = [int(p) for m in g.members for t in m.assignment.topic_partitions
                    for p in t.partitions]
        else:
            g = call_once(node.bootstrap, 15, 5, DescribeGroupsRequest(
                groups=(GroupId(group),), include_authorized_operations=False)).groups[0]
            held = [tp.partition for m in g.members if m.member_assignment
                    for tp in decode_assignment(m.member_assignment).partitions]
    except OSError:  # the coordinator is moving
        return False
    return (g.error_code == ErrorCode.none and g.group_state == "Stable"
            and sorted(held) == list(range(PARTITIONS)))


def wait_mid_rebalance(bootstrap: str, group: str, protocol: str, members: int,
                       timeout: float = 60) -> str:
    """Until the coordinator at ``bootstrap`` has taken the newest member in and the group
    is not settled yet; returns the state seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if protocol == "classic":
            state = group_state(bootstrap, group)
            if state in ("PreparingRebalance", "CompletingRebalance"):
                return state
        else:
            state, count, reached = consumer_group_state(bootstrap, group)
            if count >= members and (state != "Stable" or not reached):
                return state
        time.sleep(0.01)
    raise AssertionError(f"group {group} was never seen rebalancing")


# ---------------------------------------------------------------------- one run


@dataclass
class Outcome:
    kind: tuple[str, str]
    moment: str
    killed: int
    """The node killed."""
    state_at_kill: str
    handed_back: bool
    """The restarted node took the group's shard back (a hand-off under live members)."""
    seconds: float
    """Kill -> Stable with every partition assigned and records flowing from every partition."""
    stable_after: float
    resumed_after: float
    acked: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    double_owned: list[str] = field(default_factory=list)
    fenced: list[str] = field(default_factory=list)
    """Overlaps whose earlier holder was fenced (told later that it lost the partition):
    Kafka's zombie window, allowed (see :func:`double_owners`)."""
    fatal: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)

    def line(self) -> str:
        client, protocol = self.kind
        return (f"{client:>10} {protocol:<8} {self.moment:<9} {self.seconds:5.1f} s "
                f"(Stable again after {self.stable_after:.1f} s, every partition delivering "
                f"after {self.resumed_after:.1f} s; state at the kill: {self.state_at_kill}"
                f"{'; fenced: ' + str(self.fenced) if self.fenced else ''})")


def run(cluster: Cluster, kind: tuple[str, str], moment: str, group: str,
        java: Callable[[], JavaKit], records: int = 200) -> Outcome:
    """One failover: see the module docstring. Then the killed node is restarted (same id
    and port) and handed its share back while the members go on consuming, so runs can
    follow each other on one cluster."""
    bootstrap = cluster.bootstrap
    acked_b: set[bytes] = set()
    produce(bootstrap, [f"{group}/a{i}".encode() for i in range(records)], acked_b)
    members = [member(kind, bootstrap, group, f"{kind[0]}-{kind[1]}-{n}", java)
               for n in ("a", "b")]
    try:
        def consumed() -> dict[str, tuple[int, int]]:
            out: dict[str, tuple[int, int]] = {}
            for m in members:
                for v, seen in m.consumed().items():
                    if v not in out or seen[1] < out[v][1]:
                        out[v] = seen
            return out

        wait_until(lambda: len(consumed()) >= records // 2
                   and stable_and_assigned(cluster, group, kind[1]), 90,
                   "a settled, consuming group")
        coordinator = cluster.owner(OFFSETS_TOPIC, partition_for(group, 6))
        state = "Stable"
        if moment == "reconcile":
            members.append(member(kind, bootstrap, group, f"{kind[0]}-{kind[1]}-c", java))
            state = wait_mid_rebalance(cluster.nodes[coordinator].bootstrap, group, kind[1], 3)
        killed = now_ms()
        cluster.nodes[coordinator].kill()

        stable_at: list[int] = []
        watching = threading.Event()

        def watch() -> None:
            while watching.is_set() and not stable_at:
                if stable_and_assigned(cluster, group, kind[1]):
                    stable_at.append(now_ms())
                time.sleep(0.1)

        watching.set()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        after = [f"{group}/b{i}".encode() for i in range(records)]
        produce(bootstrap, after, acked_b)
        acked = {v.decode() for v in acked_b}
        try:
            wait_until(lambda: acked <= consumed().keys(), 120,
                       "every acknowledged record consumed")
            wait_until(lambda: bool(stable_at), 60, "the group Stable again")
        finally:
            watching.clear()
            watcher.join(10)
        firsts: dict[int, int] = {}
        for v, (p, at) in consumed().items():
            if v.startswith(f"{group}/b") and (p not in firsts or at < firsts[p]):
                firsts[p] = at
        assert sorted(firsts) == list(range(PARTITIONS)), firsts
        resumed = max(firsts.values())

        # The killed node comes back (same id and port) and is handed its share back, the
        # group's shard with it: the members go on through that move too.
        cluster.restart_killed()
        handed_back = cluster.owner(OFFSETS_TOPIC, partition_for(group, 6)) == coordinator
        produce(bootstrap, [f"{group}/c{i}".encode() for i in range(records)], acked_b)
        acked = {v.decode() for v in acked_b}
        wait_until(lambda: acked <= consumed().keys(), 120,
                   "every record acknowledged after the hand-back consumed")
        wait_until(lambda: stable_and_assigned(cluster, group, kind[1]), 60,
                   "the group Stable after the hand-back")

        checker = consumer(bootstrap, group)  # never subscribes: reads the group's commits
        try:
            ends = end_offsets(checker)

            def commits_at_end() -> bool:
                if not all(m.commit() for m in members):
                    return False
                done = checker.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                         timeout=10)
                committed = {tp.partition: tp.offset for tp in done}
                return committed == ends

            # A partition handed over after the kill to a member that has not read it commits
            # nothing new until it has: commit until the commits reach the end offsets.
            wait_until(commits_at_end, 60, "commits equal to the end offsets")
        finally:
            checker.close()
        fenced: list[str] = []
        double_owned = double_owners(members, fenced)
        outcome = Outcome(
            kind, moment, coordinator, state, handed_back,
            seconds=(max(stable_at[0], resumed) - killed) / 1000,
            stable_after=(stable_at[0] - killed) / 1000, resumed_after=(resumed - killed) / 1000,
            acked=acked, missing=acked - consumed().keys(),
            double_owned=double_owned, fenced=fenced,
            fatal={m.name: m.fatal() for m in members if m.fatal()},
            errors={m.name: m.errors() for m in members if m.errors()})
    finally:
        for m in members:
            with contextlib.suppress(Exception):
                m.close()
        cluster.restart_killed()
    return outcome
