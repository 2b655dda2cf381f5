"""Share groups (KIP-932) with confluent-kafka's ``ShareConsumer`` (librdkafka's share
consumer) over TCP: more members than partitions all get records and every record is
accepted once (implicit mode); in explicit mode a RELEASE and an expired lock redeliver with
a delivery count of 2 and more, a REJECT archives, and the delivery count limit archives a
record released too often; a consumer that disappears without closing gives its records
back when its connection closes. One broker, short locks (2 s) and sessions."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka.admin import AdminClient

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, produce, unique
from tests.conformance.sharekit import (
    SHARE_BROKER_CONFIG,
    Share,
    poll_until,
    set_group_configs,
    share_consumer,
    wait_assigned,
)

pytestmark = pytest.mark.conformance

EARLIEST = {"share.auto.offset.reset": "earliest"}


def _assigned(broker: BrokerProcess, group: str, members: int) -> bool:
    try:
        wait_assigned(broker.bootstrap, group, members, timeout=0)
    except AssertionError:
        return False
    return True


def _setup(broker: BrokerProcess, partitions: int, per_partition: int) -> tuple[str, str,
                                                                                   set[bytes]]:
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, partitions)
    set_group_configs(broker.bootstrap, group, EARLIEST)
    values = produce(broker.bootstrap, topic, partitions, per_partition)
    return topic, group, values


def test_more_members_than_partitions_each_record_accepted_once(
        share_broker: BrokerProcess) -> None:
    topic, group, _ = _setup(share_broker, 2, 0)
    shares = [share_consumer(share_broker.bootstrap, group, [topic], f"m{i}",
                             **{"max.poll.records": "5"}) for i in range(3)]
    try:
        poll_until(shares, lambda: _assigned(share_broker, group, 3))
        # batches of 5: whole batches are acquired (KIP-1206's batch-optimized mode)
        values = produce(share_broker.bootstrap, topic, 2, 60, **{"batch.num.messages": 5})
        seen: Counter[bytes] = Counter()
        poll_until(shares, lambda: set(seen) >= values,
                   on_message=lambda s, m: seen.update([m.value()]))
        # implicit mode: the next poll accepts; nothing is redelivered after that
        for _ in range(10):
            for s in shares:
                for m in s.poll(0.1):
                    seen.update([m.value()])
        assert set(seen) == values
        assert max(seen.values()) == 1, [v for v, n in seen.items() if n > 1][:5]
        assert all(s.got for s in shares), [len(s.got) for s in shares]
    finally:
        for s in shares:
            s.close()


def test_delete_group_forgets_its_state(share_broker: BrokerProcess) -> None:
    """DeleteGroups refuses a share group with members, deletes an empty one with its
    share-partition state: a new member of the same group id reads everything again."""
    topic, group, values = _setup(share_broker, 1, 3)
    a = share_consumer(share_broker.bootstrap, group, [topic], "a")
    admin = AdminClient({"bootstrap.servers": share_broker.bootstrap})
    try:
        poll_until([a], lambda: len(a.got) == 3)
        a.poll(0.2)  # implicit mode: accepts the first three
        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([group])[group].result(15)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        a.close()
    admin.delete_consumer_groups([group])[group].result(15)
    b = share_consumer(share_broker.bootstrap, group, [topic], "b")
    try:
        poll_until([b], lambda: {v for _, _, v, _ in b.got} == values)
    finally:
        b.close()


def test_release_reject_and_lock_expiry_in_explicit_mode(share_broker: BrokerProcess) -> None:
    """``a`` releases a third of the records, rejects a third and leaves the rest
    unacknowledged (it stops polling, so their locks run out); ``b`` then gets exactly the
    released and expired ones, each with a delivery count of 2, and nothing after it
    accepted them."""
    topic, group, values = _setup(share_broker, 1, 6)
    explicit = {"share.acknowledgement.mode": "explicit"}
    a = share_consumer(share_broker.bootstrap, group, [topic], "a", **explicit)
    b: Share | None = None
    outcome: dict[bytes, str] = {}
    try:
        poll_until([a], lambda: len(a.got) == len(values))
        for m in a.last:
            index = int(m.value().rsplit(b"/", 1)[1])
            outcome[m.value()] = ("release", "reject", "expire")[index % 3]
            if index % 3 == 0:
                a.consumer.acknowledge(m, AcknowledgeType.RELEASE)
            elif index % 3 == 1:
                a.consumer.acknowledge(m, AcknowledgeType.REJECT)
        a.consumer.commit_sync(10)
        b = share_consumer(share_broker.bootstrap, group, [topic], "b", **explicit)
        again: dict[bytes, int] = {}

        def accept(s: Share, m: Message) -> None:
            again[m.value()] = m.delivery_count()
            s.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            s.consumer.commit_sync(10)

        redelivered = {v for v, what in outcome.items() if what in ("release", "expire")}
        poll_until([b], lambda: set(again) >= redelivered, on_message=accept)
        assert set(again) == redelivered  # rejected records never come back
        assert set(again.values()) == {2}, again
        for _ in range(15):  # accepted: nothing more, even past the lock duration
            assert not b.poll(0.2)
    finally:
        a.close()
        if b is not None:
            b.close()


def test_delivery_count_limit_archives(share_broker: BrokerProcess) -> None:
    topic, group, _ = _setup(share_broker, 1, 1)
    a = share_consumer(share_broker.bootstrap, group, [topic], "a",
                       **{"share.acknowledgement.mode": "explicit"})
    counts: list[int] = []
    try:
        def release(s: Share, m: Message) -> None:
            counts.append(m.delivery_count())
            s.consumer.acknowledge(m, AcknowledgeType.RELEASE)
            s.consumer.commit_sync(10)

        poll_until([a], lambda: len(counts) == 3, on_message=release)
        assert counts == [1, 2, 3]  # group.share.delivery.count.limit=3
        for _ in range(15):
            assert not a.poll(0.2)  # archived at the limit
    finally:
        a.close()


def test_a_vanished_consumer_gives_its_records_back(share_broker: BrokerProcess) -> None:
    """A consumer that holds records and disappears without closing (its connection
    drops): the records come back to another member at once, long before its lock (60 s
    for this group) would expire."""
    topic, group, values = _setup(share_broker, 1, 5)
    set_group_configs(share_broker.bootstrap, group, {"share.record.lock.duration.ms": "60000"})
    _acquire_and_vanish(share_broker.bootstrap, group, topic, 5)
    other = share_consumer(share_broker.bootstrap, group, [topic], "other")
    try:
        poll_until([other], lambda: {v for _, _, v, _ in other.got} >= values, timeout=20)
        assert all(n == 2 for _, _, _, n in other.got)
    finally:
        other.close()


def _acquire_and_vanish(bootstrap: str, group: str, topic: str, records: int) -> None:
    """A consumer acquires ``records`` and is destroyed without close() on return:
    librdkafka drops its connections without closing its share session."""
    holder = share_consumer(bootstrap, group, [topic], "holder",
                            **{"share.acknowledgement.mode": "explicit"})
    poll_until([holder], lambda: len(holder.got) == records)


def test_a_killed_broker_keeps_acknowledged_state(tmp_path_factory: pytest.TempPathFactory
                                                  ) -> None:
    """Accepted and rejected records stay done across a kill -9 and restart (the state is
    in ``__share_group_state``); the records acquired but not acknowledged come back."""
    broker = BrokerProcess(tmp_path_factory.mktemp("share-kill") / "data",
                           SHARE_BROKER_CONFIG).start()
    try:
        topic, group, values = _setup(broker, 1, 10)
        a = share_consumer(broker.bootstrap, group, [topic], "a",
                           **{"share.acknowledgement.mode": "explicit"})
        poll_until([a], lambda: len(a.got) == len(values))
        done = set()
        for m in a.last:
            index = int(m.value().rsplit(b"/", 1)[1])
            if index < 7:
                a.consumer.acknowledge(m, AcknowledgeType.ACCEPT if index < 5
                                       else AcknowledgeType.REJECT)
                done.add(m.value())
        a.consumer.commit_sync(10)
        broker.kill()
        a.close()
        broker.start()
        b = share_consumer(broker.bootstrap, group, [topic], "b")
        try:
            poll_until([b], lambda: {v for _, _, v, _ in b.got} >= values - done, timeout=30)
            for _ in range(10):
                b.poll(0.2)
            assert {v for _, _, v, _ in b.got} == values - done
            assert len(b.got) == len(values - done)
        finally:
            b.close()
    finally:
        broker.stop()


def test_rejected_and_exhausted_records_go_to_the_dead_letter_topic(
        share_broker: BrokerProcess) -> None:
    """KIP-1191: with ``errors.deadletterqueue.topic.name`` set, a REJECTed record and one
    archived at the delivery limit (3) are copied to that topic, with headers naming their
    origin; an accepted one is not."""
    topic, group, values = _setup(share_broker, 1, 3)
    dlq = unique("dlq")
    create_topic(share_broker.bootstrap, dlq, 1)
    set_group_configs(share_broker.bootstrap, group,
                      {"errors.deadletterqueue.topic.name": dlq})
    a = share_consumer(share_broker.bootstrap, group, [topic], "a",
                       **{"share.acknowledgement.mode": "explicit"})
    try:
        def decide(s: Share, m: Message) -> None:
            index = int(m.value().rsplit(b"/", 1)[1])
            ack = (AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.RELEASE)
            s.consumer.acknowledge(m, ack[index])
            s.consumer.commit_sync(10)

        poll_until([a], lambda: len(a.got) == 5, on_message=decide)  # 0, 1, then 2 thrice
    finally:
        a.close()
    reader = Consumer({"bootstrap.servers": share_broker.bootstrap, "group.id": unique("r"),
                       "auto.offset.reset": "earliest"})
    reader.subscribe([dlq])
    got: list[Message] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            m = reader.poll(0.2)
            if m is not None and not m.error():
                got.append(m)
    finally:
        reader.close()
    assert sorted(m.value() for m in got) == sorted(v for v in values
                                                    if not v.endswith(b"/0"))
    by_value = {m.value(): dict(m.headers() or []) for m in got}
    rejected = by_value[next(v for v in values if v.endswith(b"/1"))]
    assert (rejected["__dlq.errors.topic"], rejected["__dlq.errors.group.id"],
            rejected["__dlq.errors.offset"], rejected["__dlq.errors.delivery.count"]) == (
                topic.encode(), group.encode(), b"1", b"1")
    assert by_value[next(v for v in values if v.endswith(b"/2"))][
        "__dlq.errors.delivery.count"] == b"3"


def test_read_committed_share_group_skips_aborted_and_open_transactions(
        share_broker: BrokerProcess) -> None:
    """``share.isolation.level=read_committed`` (a group config): a librdkafka
    transactional producer commits one transaction and aborts one, then leaves one open
    with a plain record after it. The read_committed group gets the committed records
    once, never the aborted ones, and nothing at or past the open transaction until it
    commits; a read_uncommitted group on the same topic gets the aborted records too."""
    topic = unique("sq")
    create_topic(share_broker.bootstrap, topic, 1)
    committed_group, uncommitted_group = unique("sg"), unique("sg")
    set_group_configs(share_broker.bootstrap, committed_group,
                      {**EARLIEST, "share.isolation.level": "read_committed"})
    set_group_configs(share_broker.bootstrap, uncommitted_group, EARLIEST)
    txn = Producer({"bootstrap.servers": share_broker.bootstrap,
                    "transactional.id": unique("tid")})
    plain = Producer({"bootstrap.servers": share_broker.bootstrap})
    txn.init_transactions(15)

    def transaction(prefix: str, end: str | None) -> set[bytes]:
        values = {f"{prefix}{i}".encode() for i in range(5)}
        txn.begin_transaction()
        for v in sorted(values):
            txn.produce(topic, v, partition=0)
        txn.flush(15)
        if end == "commit":
            txn.commit_transaction(15)
        elif end == "abort":
            txn.abort_transaction(15)
        return values

    def plain_record(value: bytes) -> None:
        plain.produce(topic, value, partition=0)
        assert plain.flush(15) == 0

    committed = transaction("ok", "commit")
    plain_record(b"before")
    aborted = transaction("aborted", "abort")
    open_txn = transaction("open", None)
    plain_record(b"after")
    a = share_consumer(share_broker.bootstrap, committed_group, [topic], "a")
    b = share_consumer(share_broker.bootstrap, uncommitted_group, [topic], "b")
    seen: Counter[bytes] = Counter()
    try:
        poll_until([a], lambda: set(seen) >= committed | {b"before"},
                   on_message=lambda s, m: seen.update([m.value()]))
        for _ in range(10):  # the open transaction holds back what follows it
            for m in a.poll(0.2):
                seen.update([m.value()])
        assert set(seen) == committed | {b"before"}
        txn.commit_transaction(15)
        later = open_txn | {b"after"}
        poll_until([a], lambda: set(seen) >= later,
                   on_message=lambda s, m: seen.update([m.value()]))
        for _ in range(5):
            for m in a.poll(0.2):
                seen.update([m.value()])
        assert set(seen) == committed | later | {b"before"}  # never the aborted ones
        assert max(seen.values()) == 1
        everything: set[bytes] = set()
        poll_until([b], lambda: everything >= aborted | committed | later,
                   on_message=lambda s, m: everything.add(m.value()))
    finally:
        a.close()
        b.close()
