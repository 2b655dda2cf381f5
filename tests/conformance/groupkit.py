"""Helpers for the group-coordinator conformance tests (tests/conformance/test_groups_*.py).

Every wait is bounded; nothing asserts on wall-clock durations. Consumers are polled from
the test's own thread, so their rebalance callbacks run in a known order and an
:class:`OwnershipLog` can check that no partition is ever held by two live members at once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, Self

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

Tp = tuple[str, int]

# Short but legal timings: the test broker allows session timeouts down to 1000 ms.
FAST = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
    "max.poll.interval.ms": 10000,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "topic.metadata.refresh.interval.ms": 1000,
    "reconnect.backoff.max.ms": 200,
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, step: float = 0.05,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(15)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int,
            tag: str = "", **config: str | int) -> set[bytes]:
    """``per_partition`` records to every partition (``config``: more producer settings);
    returns their (unique) values."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **config})
    values: set[bytes] = set()
    for part in range(partitions):
        for i in range(per_partition):
            v = f"{topic}/{part}/{tag}{i}".encode()
            p.produce(topic, value=v, partition=part)
            values.add(v)
    assert p.flush(15) == 0
    return values


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[Tp, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    res = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    return {(tp.topic, tp.partition): f.result(15).offset for tp, f in res.items()}


def committed(bootstrap: str, group: str, tps: Iterable[Tp]) -> dict[Tp, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in tps])
    res = admin.list_consumer_group_offsets([req])[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions}


class OwnershipLog:
    """Ownership as the members' rebalance callbacks report it, checked on every change.

    A partition may only be assigned to a member when no other *live* member holds it
    (eager strategies revoke everything before rejoining; cooperative ones revoke what
    moves before the next generation gives it away). Members declared dead (killed,
    stalled past max.poll.interval.ms) no longer count as holders.
    """

    def __init__(self) -> None:
        self.owned: dict[str, set[Tp]] = {}
        self.dead: set[str] = set()
        self.violations: list[str] = []
        self.events: list[tuple[float, str, str, tuple[Tp, ...]]] = []
        self._lock = threading.Lock()

    def assigned(self, member: str, tps: Iterable[Tp]) -> None:
        tps = tuple(tps)
        with self._lock:
            self.events.append((time.monotonic(), member, "assign", tps))
            for tp in tps:
                for other, held in self.owned.items():
                    if other != member and other not in self.dead and tp in held:
                        self.violations.append(f"{tp} assigned to {member} while {other} "
                                               "holds it")
            self.owned.setdefault(member, set()).update(tps)

    def revoked(self, member: str, tps: Iterable[Tp]) -> None:
        tps = tuple(tps)
        with self._lock:
            self.events.append((time.monotonic(), member, "revoke", tps))
            self.owned.setdefault(member, set()).difference_update(tps)

    def mark_dead(self, member: str) -> None:
        with self._lock:
            self.dead.add(member)

    def callbacks(self, member: str) -> int:
        return sum(1 for e in self.events if e[1] == member)


class Member:
    """A confluent-kafka consumer polled by the test thread; records what it consumed."""

    #: the consumer settings under the test's own
    DEFAULTS: dict[str, Any] = FAST

    def __init__(self, bootstrap: str, group: str, name: str, log: OwnershipLog | None = None,
                 **config: Any) -> None:
        self.name = name
        self.log = log if log is not None else OwnershipLog()
        self.seen: list[bytes] = []
        self.errors: list[KafkaError] = []
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group,
                                "client.id": name, **self.DEFAULTS,
                                "error_cb": self.errors.append}
        conf.update(config)
        self.consumer = Consumer(conf)
        self.closed = False
        self.commit_each_batch = False
        #: synchronous commits made by :meth:`poll` ("batch") and the revoke callback
        #: ("revoke"), and the ones refused, with the error
        self.commits: dict[str, int] = {"batch": 0, "revoke": 0}
        self.commit_errors: list[tuple[str, KafkaError]] = []

    def subscribe(self, topics: Sequence[str], commit_on_revoke: bool = False,
                  commit_each_batch: bool = False) -> Self:
        """Subscribe; ``commit_on_revoke`` commits (synchronously) the positions of the
        partitions being revoked inside the revoke callback, ``commit_each_batch`` what
        each :meth:`poll` consumed."""
        def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
            self.log.assigned(self.name, [(p.topic, p.partition) for p in parts])

        def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
            if commit_on_revoke:
                self._commit("revoke", [p for p in c.position(parts) if p.offset >= 0])
            on_lost(c, parts)

        def on_lost(c: Consumer, parts: list[TopicPartition]) -> None:
            self.log.revoked(self.name, [(p.topic, p.partition) for p in parts])

        self.commit_each_batch = commit_each_batch
        self.consumer.subscribe(list(topics), on_assign=on_assign, on_revoke=on_revoke,
                                on_lost=on_lost)
        return self

    def _commit(self, where: str, offsets: list[TopicPartition] | None = None) -> None:
        if offsets == []:
            return
        try:
            if offsets is None:
                self.consumer.commit(asynchronous=False)
            else:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            self.commits[where] += 1
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                self.commit_errors.append((where, exc.args[0]))

    def poll(self, timeout: float = 0.02) -> None:
        got = False
        for m in self.consumer.consume(200, timeout=timeout):
            err = m.error()
            if err is None:
                self.seen.append(m.value())
                got = True
            elif err.code() != KafkaError._PARTITION_EOF:
                self.errors.append(err)
        if got and self.commit_each_batch:
            self._commit("batch")

    def commit(self) -> bool:
        """Commit consumed positions synchronously; False if the group refused it now."""
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException as exc:
            code = exc.args[0].code()
            if code in (KafkaError._NO_OFFSET, KafkaError.REBALANCE_IN_PROGRESS,
                        KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID):
                return code == KafkaError._NO_OFFSET
            raise
        return True

    def assignment(self) -> set[Tp]:
        return {(p.topic, p.partition) for p in self.consumer.assignment()}

    def positions(self) -> dict[Tp, int]:
        """The client's fetch position per assigned partition (-1001: none yet)."""
        return {(p.topic, p.partition): p.offset
                for p in self.consumer.position(self.consumer.assignment())}

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


class Polled(Protocol):
    """What :func:`settle` needs of a member, whatever its client library."""

    name: str
    closed: bool

    def poll(self, timeout: float = ...) -> None: ...

    def assignment(self) -> set[Tp]: ...

    def positions(self) -> dict[Tp, int]: ...


def poll_all(members: Iterable[Polled], rounds: int = 1) -> None:
    ms = [m for m in members if not m.closed]
    for _ in range(rounds):
        for m in ms:
            m.poll()


def settle(members: Sequence[Polled], partitions: set[Tp], timeout: float = 30.0,
           counts: Sequence[int] | None = None) -> None:
    """Poll until the live members' assignments split ``partitions`` exactly (and, given
    ``counts``, with those sizes in order). Fails on a timeout or a double owner."""
    def split() -> bool:
        poll_all(members)
        held = [m.assignment() for m in members]
        flat = [tp for h in held for tp in h]
        if len(flat) != len(set(flat)) or set(flat) != partitions:
            return False
        return counts is None or sorted(len(h) for h in held) == sorted(counts)

    wait_until(split, timeout, step=0, what=f"assignment of {len(partitions)} partitions "
               f"over {[m.name for m in members]}")
    # Quiescent point: the members' own views are disjoint and complete.
    held = [m.assignment() for m in members]
    flat = [tp for h in held for tp in h]
    assert len(flat) == len(set(flat)), held
    assert set(flat) == partitions


def drain(members: Sequence[Polled], ends: dict[Tp, int], timeout: float = 30.0) -> None:
    """Poll until the live members own every partition of ``ends`` and each has consumed
    its own partitions up to their end offsets (so a commit now covers everything)."""
    def done() -> bool:
        poll_all(members)
        live = [m for m in members if not m.closed]
        owned = [tp for m in live for tp in m.assignment()]
        if set(owned) != set(ends):
            return False
        return all(m.positions().get(tp) == ends[tp] for m in live for tp in m.assignment())

    wait_until(done, timeout, step=0, what="members consumed to the end offsets")


def tps_of(topic: str, partitions: int) -> set[Tp]:
    return {(topic, p) for p in range(partitions)}


def heartbeat_error(bootstrap: str, group: str, member_id: str, generation: int) -> int:
    """Error code of a raw Heartbeat (v4) for ``member_id`` at ``generation``."""
    from kio.schema.heartbeat.v4.request import HeartbeatRequest
    from kio.schema.types import GroupId
    from kio.static.primitive import i32

    from tests.wire import WireClient

    c = WireClient(bootstrap)
    try:
        resp = c.call(12, 4, HeartbeatRequest(group_id=GroupId(group),
                                              generation_id=i32(generation),
                                              member_id=member_id, group_instance_id=None))
        return int(resp.error_code)
    finally:
        c.close()


def generation_of(bootstrap: str, group: str, member_id: str, limit: int = 50) -> int:
    """The group's current generation, probed with heartbeats as ``member_id`` (the
    coordinator answers ILLEGAL_GENERATION (22) for every generation but the current one)."""
    for g in range(1, limit):
        code = heartbeat_error(bootstrap, group, member_id, g)
        if code == 0:
            return g
        assert code in (22, 27), f"heartbeat at generation {g}: error {code}"
    raise AssertionError(f"no generation below {limit} accepted for {member_id}")
