"""``samsa.ShareConsumer`` over TCP against a real broker (KIP-932): more members than
partitions all get records and each record is accepted once (implicit mode); in explicit
mode ACCEPT is final, RELEASE redelivers with delivery count 2, REJECT archives and writes
the dead-letter topic; ``commit_sync`` answers per partition and the acknowledgement
commit callback hears every answer, INVALID_RECORD_STATE for a lock that had expired; a
consumer killed without ``close`` gives its records back to another member; ``close``
releases what it held; a broker restart under a consumer restarts its share sessions. One
broker, short locks (2 s) and sessions."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa import AcknowledgeType, Consumer, ShareConsumer, TopicPartition
from samsa.client.errors import IllegalStateError, KafkaError, WakeupError
from samsa.client.records import ConsumerRecord
from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, produce, unique
from tests.conformance.sharekit import SHARE_BROKER_CONFIG, set_group_configs, wait_assigned

pytestmark = pytest.mark.slow

EARLIEST = {"share.auto.offset.reset": "earliest"}
A = AcknowledgeType


def setup(broker: BrokerProcess, partitions: int, per_partition: int,
          **group_configs: str) -> tuple[str, str, set[bytes]]:
    topic, group = unique("sc"), unique("scg")
    create_topic(broker.bootstrap, topic, partitions)
    set_group_configs(broker.bootstrap, group, {**EARLIEST, **group_configs})
    return topic, group, produce(broker.bootstrap, topic, partitions, per_partition)


def member(broker: BrokerProcess, group: str, topic: str, **config: Any) -> ShareConsumer:
    return ShareConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, **config)


def poll_until(members: Iterable[ShareConsumer], done: Callable[[], bool],
               on_record: Callable[[ShareConsumer, ConsumerRecord], None],
               timeout: float = 30.0) -> None:
    """Poll each member in turn (100 ms each) until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out polling share consumers"
        for m in members:
            for r in m.poll(100):
                on_record(m, r)


def settle(broker: BrokerProcess, group: str, members: int,
           pollers: Iterable[Callable[[], object]], timeout: float = 60.0) -> None:
    """Run ``pollers`` in turn until the group has ``members`` members, each with an
    assignment at the group's epoch (records produced after it reach every member)."""
    pollers = list(pollers)
    deadline = time.monotonic() + timeout
    while True:
        for poll in pollers:
            poll()
        try:
            wait_assigned(broker.bootstrap, group, members, timeout=0)
            return
        except AssertionError:
            assert time.monotonic() < deadline, f"{group} never settled"


def index(r: ConsumerRecord) -> int:
    assert r.value is not None
    return int(r.value.rsplit(b"/", 1)[1])


def test_more_members_than_partitions_each_record_accepted_once(
        share_broker: BrokerProcess) -> None:
    topic, group, _ = setup(share_broker, 2, 0)
    members = [member(share_broker, group, topic, max_poll_records=5) for _ in range(3)]
    got: dict[str, Counter[bytes]] = {m.member_id: Counter() for m in members}
    try:
        settle(share_broker, group, 3, [functools.partial(m.poll, 50) for m in members])
        # batches of 5: whole batches are acquired (KIP-1206's batch-optimized mode)
        values = produce(share_broker.bootstrap, topic, 2, 60, **{"batch.num.messages": 5})

        def take(m: ShareConsumer, r: ConsumerRecord) -> None:
            assert r.value is not None and r.delivery_count == 1
            got[m.member_id][r.value] += 1

        poll_until(members, lambda: set().union(*got.values()) >= values, take)
        for _ in range(10):  # implicit mode: the next poll accepted; nothing comes back
            for m in members:
                for r in m.poll(100):
                    take(m, r)
        total = sum(got.values(), Counter())
        assert set(total) == values and max(total.values()) == 1
        assert all(got.values()), {k: len(v) for k, v in got.items()}
        assert all(len(m.assignment()) >= 1 for m in members)
    finally:
        for m in members:
            m.close()


def test_accept_release_reject_in_explicit_mode(share_broker: BrokerProcess) -> None:
    """Records 0-2 of a 9: ACCEPT, RELEASE, REJECT by index mod 3. The released ones come
    back with delivery count 2 and are then accepted; the accepted and rejected ones never
    come back; the rejected ones are in the dead-letter topic."""
    dlq = unique("dlq")
    create_topic(share_broker.bootstrap, dlq, 1)
    topic, group, values = setup(share_broker, 1, 9,
                                 **{"errors.deadletterqueue.topic.name": dlq})
    c = member(share_broker, group, topic, share_acknowledgement_mode="explicit")
    seen: list[tuple[int, int]] = []
    try:
        def decide(m: ShareConsumer, r: ConsumerRecord) -> None:
            seen.append((index(r), r.delivery_count))
            kind = (A.ACCEPT, A.RELEASE, A.REJECT)[index(r) % 3]
            m.acknowledge(r, A.ACCEPT if r.delivery_count > 1 else kind)

        poll_until([c], lambda: len(seen) == 12, decide)
        for _ in range(15):
            for r in c.poll(100):
                decide(c, r)
        assert sorted(seen) == sorted([(i, 1) for i in range(9)] + [(1, 2), (4, 2), (7, 2)])
        # polling again without acknowledging is refused, as Kafka's consumer does
        produce(share_broker.bootstrap, topic, 1, 1, tag="late")
        late: list[ConsumerRecord] = []
        while not late:
            late = c.poll(200)
        with pytest.raises(IllegalStateError, match="must be acknowledged"):
            c.poll(0)
        with pytest.raises(IllegalStateError):
            c.acknowledge(late[0]._replace(offset=0))  # not a record of the last poll
        c.acknowledge(late[0], A.ACCEPT)
        assert c.commit_sync(10_000) == {TopicPartition(topic, 0): None}
    finally:
        c.close()
    reader = Consumer(dlq, bootstrap_servers=share_broker.bootstrap, group_id=unique("r"),
                      auto_offset_reset="earliest")
    try:
        dead: list[Any] = []
        deadline = time.monotonic() + 20
        while len(dead) < 3 and time.monotonic() < deadline:
            dead.extend(reader.poll(200))
        assert sorted(r.value for r in dead) == sorted(
            v for v in values if int(v.rsplit(b"/", 1)[1]) % 3 == 2)
    finally:
        reader.close()


def test_commit_sync_results_and_the_callback(share_broker: BrokerProcess) -> None:
    """``commit_sync`` answers per partition; the callback hears each answer with its
    offsets; acknowledging records whose lock expired (2 s) fails with
    INVALID_RECORD_STATE, in the result and the callback, and they come back."""
    topic, group, _ = setup(share_broker, 2, 3)
    c = member(share_broker, group, topic, share_acknowledgement_mode="explicit",
               max_poll_records=100, fetch_max_wait_ms=100)  # commits wait less
    heard: list[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = []
    c.set_acknowledgement_commit_callback(lambda offsets, exc: heard.append((offsets, exc)))
    try:
        records: list[ConsumerRecord] = []
        assert c.acquisition_lock_timeout_ms is None
        poll_until([c], lambda: len(records) == 6, lambda m, r: records.append(r))
        assert c.acquisition_lock_timeout_ms == 2000  # the broker's
        assert c.commit_sync(5000) == {}  # nothing acknowledged yet
        for r in records:
            if r.partition == 0:
                c.acknowledge(r, A.ACCEPT)
        assert c.commit_sync(10_000) == {TopicPartition(topic, 0): None}
        assert heard == [({TopicPartition(topic, 0): {0, 1, 2}}, None)]
        time.sleep(3)  # partition 1's locks (2 s) expire
        for r in records:
            if r.partition == 1:
                c.acknowledge(r, A.ACCEPT)
        result = c.commit_sync(10_000)
        error = result[TopicPartition(topic, 1)]
        assert isinstance(error, KafkaError) and error.code == ErrorCode.invalid_record_state
        offsets, exc = heard[-1]
        assert offsets == {TopicPartition(topic, 1): {0, 1, 2}}
        assert isinstance(exc, KafkaError) and exc.code == ErrorCode.invalid_record_state
        again: list[ConsumerRecord] = []
        poll_until([c], lambda: len(again) == 3, lambda m, r: again.append(r))
        assert {(r.partition, r.delivery_count) for r in again} == {(1, 2)}
        for r in again:
            c.acknowledge(r, A.RENEW)  # KIP-1222: the locks start again
        assert c.commit_sync(10_000) == {TopicPartition(topic, 1): None}
        time.sleep(1.2)
        for r in again:
            c.acknowledge(r, A.RENEW)
        assert c.commit_sync(10_000) == {TopicPartition(topic, 1): None}
        time.sleep(1.2)  # > 2 s after they were acquired: held thanks to the renewals
        for r in again:
            c.acknowledge(r, A.ACCEPT)
        c.commit_async()
        deadline = time.monotonic() + 10
        while heard[-1] != ({TopicPartition(topic, 1): {0, 1, 2}}, None):
            assert time.monotonic() < deadline
            assert c.poll(100) == []
    finally:
        c.close()


def test_implicit_mode_commit_and_close_accept(share_broker: BrokerProcess) -> None:
    """Implicit mode: ``commit_sync`` accepts the last poll's records, ``close`` too; what
    the consumer acquired and never returned (max_poll_records=1: the fetch sent after the
    second poll) is released by the close, for the next member."""
    topic, group, values = setup(share_broker, 1, 3)
    a = member(share_broker, group, topic, max_poll_records=1)
    got: list[ConsumerRecord] = []
    try:
        poll_until([a], lambda: len(got) == 1, lambda m, r: got.append(r))
        assert a.commit_sync(10_000) == {TopicPartition(topic, 0): None}
        with pytest.raises(IllegalStateError):
            a.acknowledge(got[0])  # implicit mode
        poll_until([a], lambda: len(got) == 2, lambda m, r: got.append(r))
    finally:
        a.close()  # accepts the second; the third was never returned: released
    b = member(share_broker, group, topic)
    rest: list[ConsumerRecord] = []
    try:
        poll_until([b], lambda: len(rest) >= 1, lambda m, r: rest.append(r))
        for _ in range(5):
            rest.extend(b.poll(100))
        assert [r.value for r in got] + [r.value for r in rest] == sorted(values)
    finally:
        b.close()


HOLDER = """
import sys
from samsa import ShareConsumer
c = ShareConsumer(sys.argv[3], bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                  share_acknowledgement_mode="explicit")
held = 0
while held < int(sys.argv[4]):
    held += len(c.poll(100))
print("held", flush=True)
sys.stdin.read()
"""


def test_a_killed_consumer_gives_its_records_back(share_broker: BrokerProcess) -> None:
    """A samsa share consumer acquires every record and is SIGKILLed without close: the
    broker releases them when its connection drops, long before the lock (60 s) would
    expire; another member gets them with delivery count 2."""
    topic, group, values = setup(share_broker, 1, 5,
                                 **{"share.record.lock.duration.ms": "60000"})
    with subprocess.Popen(
            [sys.executable, "-c", HOLDER, share_broker.bootstrap, group, topic, "5"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        finally:
            holder.kill()
    other = member(share_broker, group, topic)
    got: list[ConsumerRecord] = []
    try:
        poll_until([other], lambda: len(got) >= 5, lambda m, r: got.append(r), timeout=20)
        assert {r.value for r in got} == values and {r.delivery_count for r in got} == {2}
    finally:
        other.close()


def test_deserializer_wakeup_unsubscribe_and_configs(share_broker: BrokerProcess) -> None:
    topic, group, _ = setup(share_broker, 1, 0)
    with pytest.raises(ValueError):
        ShareConsumer(bootstrap_servers=share_broker.bootstrap)
    with pytest.raises(TypeError):
        ShareConsumer(bootstrap_servers=share_broker.bootstrap, group_id=group,
                      enable_auto_commit=True)
    c = member(share_broker, group, topic, value_deserializer=bytes.decode)
    try:
        deadline = time.monotonic() + 20
        while c.member_state != "STABLE":
            assert time.monotonic() < deadline
            c.poll(100)
        produce(share_broker.bootstrap, topic, 1, 1)
        got: list[ConsumerRecord] = []
        while not got:
            got = c.poll(200)
        assert got[0].value == f"{topic}/0/0"
        threading.Timer(0.3, c.wakeup).start()
        with pytest.raises(WakeupError):
            c.poll(10_000)
        c.unsubscribe()
        assert c.member_state == "UNSUBSCRIBED" and c.assignment() == set()
        with pytest.raises(IllegalStateError):
            c.poll(0)
    finally:
        c.close()
    with pytest.raises(IllegalStateError):
        c.poll(0)


def test_a_broker_restart_restarts_the_share_sessions(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The broker is killed (-9) and restarted under a consumer: its requests fail, its
    share sessions start again at epoch 0 (the broker forgot them), it goes on and gets
    every record acknowledged; what it accepted before the kill never comes back."""
    broker = BrokerProcess(tmp_path_factory.mktemp("share-restart") / "data",
                           SHARE_BROKER_CONFIG).start()
    try:
        topic, group, values = setup(broker, 1, 10)
        c = member(broker, group, topic, max_poll_records=5, fetch_max_wait_ms=100)
        acked: set[int] = set()
        c.set_acknowledgement_commit_callback(
            lambda offsets, exc: exc is None and acked.update(*offsets.values()))
        try:
            first: list[ConsumerRecord] = []
            poll_until([c], lambda: len(first) >= 5, lambda m, r: first.append(r))
            assert c.commit_sync(10_000) == {TopicPartition(topic, 0): None}
            assert acked == {r.offset for r in first}
            broker.kill()
            broker.start()
            after: list[ConsumerRecord] = []
            poll_until([c], lambda: acked >= set(range(10)),
                       lambda m, r: after.append(r), timeout=60)
            assert not {r.offset for r in after} & {r.offset for r in first}
            assert {r.value for r in first + after} == values
        finally:
            c.close()
    finally:
        broker.stop()
