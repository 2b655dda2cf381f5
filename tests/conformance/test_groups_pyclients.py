"""kafka-python and aiokafka groups (their range, roundrobin and sticky assignors), and a
mixed group of confluent-kafka and kafka-python members sharing one strategy."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTp
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRR
from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor as AioSticky,
)
from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import KafkaError as KpError

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    Tp,
    committed,
    create_topic,
    drain,
    end_offsets,
    produce,
    settle,
    tps_of,
    unique,
    wait_until,
)

pytestmark = pytest.mark.conformance

PARTS = 6
logging.getLogger("kafka").setLevel(logging.CRITICAL)  # rebalance chatter on commits


class KpMember:
    """A kafka-python consumer behind the interface :func:`settle` polls, polled in a thread
    of its own with a long poll timeout (a short poll from a shared test thread widens the
    window of the client bug below).

    kafka-python 3.0.12 strands a leader's join that a metadata change started: the leader's
    ``need_rejoin()`` holds only while its assignment snapshot differs from the metadata,
    and performing the assignment (inside the join) makes them equal, so when ``poll()``
    times out between JoinGroup and SyncGroup no later poll awaits the join (the Java
    client's ``rejoinNeededOrPending()`` also counts a pending join; kafka-python's check
    ignores its ``_join_task``): the assignment is never applied, heartbeats stay off and
    the member never rejoins. The change that starts such a join is the subscribed topic's
    first metadata arriving after a lone first member has joined (the client asks for it
    up to retry_backoff_ms after subscribing, and the join does not wait for it): an empty
    assignment, then a rejoin. :meth:`subscribe` therefore loads the metadata before the
    first join, and the leader never sees it change.
    """

    def __init__(self, bootstrap: str, group: str, name: str, log: OwnershipLog,
                 strategy: Any) -> None:
        self.name, self.log, self.closed = name, log, False
        self.seen: list[bytes] = []
        self._positions: dict[Tp, int] = {}
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, client_id=name,
            partition_assignment_strategy=[strategy], session_timeout_ms=6000,
            heartbeat_interval_ms=300, max_poll_interval_ms=10000,
            auto_offset_reset="earliest", enable_auto_commit=False, metadata_max_age_ms=1000)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._commit: queue.Queue[bool] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def subscribe(self, topics: list[str]) -> KpMember:
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.log.revoked(member.name, [(t.topic, t.partition) for t in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.log.assigned(member.name, [(t.topic, t.partition) for t in assigned])

        self.consumer.subscribe(topics, listener=Listener())
        # A blocking Metadata round trip: the coordinator's metadata snapshot (a listener of
        # every update) holds the subscribed topics before the first join (see above).
        self.consumer.topics()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for records in self.consumer.poll(timeout_ms=500).values():
                with self._lock:
                    self.seen.extend(r.value for r in records)
            positions = {}
            for tp in self.consumer.assignment():
                with contextlib.suppress(KpError):
                    positions[(tp.topic, tp.partition)] = self.consumer.position(
                        tp, timeout_ms=100)
            self._positions = positions
            reply = self._commit
            if reply is not None:
                self._commit = None
                try:
                    self.consumer.commit()
                    reply.put(True)
                except KpError:
                    reply.put(False)

    def poll(self, timeout: float = 0.02) -> None:
        time.sleep(timeout)  # the member's own thread polls

    def assignment(self) -> set[Tp]:
        return {(t.topic, t.partition) for t in self.consumer.assignment()}

    def positions(self) -> dict[Tp, int]:
        return dict(self._positions)  # as the polling thread last saw them

    def commit(self) -> bool:
        """Commit consumed positions from the polling thread; False if refused."""
        reply: queue.Queue[bool] = queue.Queue()
        self._commit = reply
        return reply.get(timeout=30)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._stop.set()
            self._thread.join(30)
            self.consumer.close()


KP_STRATEGIES = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


@pytest.mark.parametrize("strategy", list(KP_STRATEGIES))
def test_kafka_python_group(broker: BrokerProcess, strategy: str) -> None:
    topic, group = unique(f"gkp-{strategy}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    expected = produce(broker.bootstrap, topic, PARTS, 5)
    log = OwnershipLog()
    members = [KpMember(broker.bootstrap, group, "a", log, KP_STRATEGIES[strategy])
               .subscribe([topic])]
    try:
        settle(members, every)
        members.append(KpMember(broker.bootstrap, group, "b", log, KP_STRATEGIES[strategy])
                       .subscribe([topic]))
        settle(members, every, counts=[3, 3])
        before = [m.assignment() for m in members]
        members.append(KpMember(broker.bootstrap, group, "c", log, KP_STRATEGIES[strategy])
                       .subscribe([topic]))
        settle(members, every, counts=[2, 2, 2])
        if strategy in ("sticky", "cooperative-sticky"):
            # The owned partitions travel through the coordinator (user data / owned
            # partitions in the subscription): a and b each keep 2 of their 3.
            assert [len(b & m.assignment()) for b, m in zip(before, members, strict=False)] \
                == [2, 2]
        members[0].close()
        live = members[1:]
        settle(live, every, counts=[3, 3])
        drain(live, end_offsets(broker.bootstrap, topic, PARTS))
        assert expected <= {v for m in members for v in m.seen}
        wait_until(lambda: all(m.commit() for m in live), what="commits accepted")
        assert committed(broker.bootstrap, group, every) == end_offsets(
            broker.bootstrap, topic, PARTS)
        assert log.violations == []
    finally:
        for m in members:
            m.close()


AIO_STRATEGIES = {"range": AioRange, "roundrobin": AioRR, "sticky": AioSticky}


@pytest.mark.parametrize("strategy", list(AIO_STRATEGIES))
def test_aiokafka_group(broker: BrokerProcess, strategy: str) -> None:
    topic, group = unique(f"gaio-{strategy}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    expected = produce(broker.bootstrap, topic, PARTS, 5)
    seen: set[bytes] = set()

    async def scenario() -> None:
        def consumer(name: str) -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                topic, bootstrap_servers=broker.bootstrap, group_id=group, client_id=name,
                partition_assignment_strategy=(AIO_STRATEGIES[strategy],),
                session_timeout_ms=6000, heartbeat_interval_ms=300,
                max_poll_interval_ms=10000, auto_offset_reset="earliest",
                enable_auto_commit=False, metadata_max_age_ms=1000)

        async def pump(cs: list[AIOKafkaConsumer], done: Any, what: str) -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while True:
                for c in cs:
                    for records in (await c.getmany(timeout_ms=20)).values():
                        seen.update(r.value for r in records)
                if done():
                    return
                assert loop.time() < deadline, f"timed out waiting for {what}"

        def split(cs: list[AIOKafkaConsumer], counts: list[int]) -> Any:
            def check() -> bool:
                held = [{(t.topic, t.partition) for t in c.assignment()} for c in cs]
                flat = [tp for h in held for tp in h]
                return (len(flat) == len(set(flat)) and set(flat) == every
                        and sorted(map(len, held)) == counts)
            return check

        cs = [consumer("a"), consumer("b")]
        try:
            for c in cs:
                await c.start()
            await pump(cs, split(cs, [3, 3]), "two members")
            cs.append(consumer("c"))
            await cs[-1].start()
            await pump(cs, split(cs, [2, 2, 2]), "three members")
            await cs[0].stop()
            live = cs[1:]
            await pump(live, split(live, [3, 3]), "after a left")
            ends = end_offsets(broker.bootstrap, topic, PARTS)
            drain_deadline = asyncio.get_running_loop().time() + 30
            pos: dict[Tp, int] = {}
            while not (expected <= seen and pos == ends):
                await pump(live, lambda: True, "")
                await pump(live, split(live, [3, 3]), "after a left")
                for c in live:
                    for t in c.assignment():
                        pos[(t.topic, t.partition)] = await c.position(t)
                assert asyncio.get_running_loop().time() < drain_deadline, (pos, ends)
            for c in live:
                await c.commit()
            offsets = {tp: await live[0].committed(AioTp(*tp)) for tp in every}
            assert offsets == end_offsets(broker.bootstrap, topic, PARTS)
        finally:
            for c in cs:
                await c.stop()

    asyncio.run(asyncio.wait_for(scenario(), 90))
    assert committed(broker.bootstrap, group, every) == end_offsets(
        broker.bootstrap, topic, PARTS)


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_mixed_confluent_and_kafka_python_group(broker: BrokerProcess, strategy: str) -> None:
    topic, group = unique(f"gmix-{strategy}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    expected = produce(broker.bootstrap, topic, PARTS, 5)
    log = OwnershipLog()
    ck = Member(broker.bootstrap, group, "ck", log,
                **{"partition.assignment.strategy": strategy}).subscribe([topic])
    kp = KpMember(broker.bootstrap, group, "kp", log, KP_STRATEGIES[strategy]).subscribe([topic])
    ck2: Member | None = None
    try:
        settle([ck, kp], every, counts=[3, 3])
        # A third member (librdkafka again) joins, then the first leaves: the leader changes.
        ck2 = Member(broker.bootstrap, group, "ck2", log,
                     **{"partition.assignment.strategy": strategy}).subscribe([topic])
        settle([ck, kp, ck2], every, counts=[2, 2, 2])
        ck.close()
        settle([kp, ck2], every, counts=[3, 3])
        members = [kp, ck2]
        drain(members, end_offsets(broker.bootstrap, topic, PARTS))
        assert expected <= {v for m in (ck, kp, ck2) for v in m.seen}
        wait_until(lambda: all(m.commit() for m in members), what="commits accepted")
        assert committed(broker.bootstrap, group, every) == end_offsets(
            broker.bootstrap, topic, PARTS)
        assert log.violations == []
    finally:
        for m in (ck, kp, ck2):
            if m is not None:
                m.close()
