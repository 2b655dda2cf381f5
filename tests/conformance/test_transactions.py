"""Transactions with librdkafka (confluent-kafka): a transactional producer's commits and
aborts as read_committed and read_uncommitted consumers see them, fencing by a second
instance of the same transactional.id, an abandoned transaction that times out, a broker
killed mid-transaction (kill -9) and restarted, consume-transform-produce exactly once
across a fencing restart, and OffsetFetch require_stable while offsets are pending; and
aiokafka's transactional producer and read_committed consumer."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTp
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.batch import BatchHeader, check_batch
from tests.broker.test_group_api_versions import call
from tests.brokerproc import BrokerProcess
from tests.wire import WireClient

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "transaction.state.log.num.partitions": "3",
}
TIMEOUT_S = 15


@pytest.fixture
def txn_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", CONFIG).start()
    yield proc
    proc.kill()


def make_topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def producer(bootstrap: str, tid: str, **extra: str | int) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "socket.connection.setup.timeout.ms": 3000, **extra})
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str,
             expect: int | None = None, wait_s: float = 3.0) -> list[str]:
    """Every value a consumer with ``isolation`` reads from the start (until ``expect``
    values arrived, or ``wait_s`` passed without any)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = time.monotonic() + wait_s
    try:
        while time.monotonic() < min(deadline, quiet_until) or (
                expect is not None and len(got) < expect and time.monotonic() < deadline):
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            got.append(m.value().decode())
            if expect is not None and len(got) >= expect:
                break
    finally:
        c.close()
    return got


def batches(bootstrap: str, topic: str, partition: int) -> list[BatchHeader]:
    """The headers of every batch of a partition, as a read_uncommitted Fetch returns them."""
    client = WireClient(bootstrap)
    out: list[BatchHeader] = []
    try:
        offset = 0
        while True:
            resp = call(client, ApiKey.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1,
                        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[{"topic": topic, "partitions": [
                            {"partition": partition, "current_leader_epoch": -1,
                             "fetch_offset": offset, "last_fetched_epoch": -1,
                             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                        forgotten_topics_data=[], rack_id="")
            data = resp.responses[0].partitions[0].records or b""
            if not data:
                return out
            pos = 0
            while pos < len(data):
                header = check_batch(data, pos, strict=False)
                out.append(header)
                pos, offset = header.end, header.next_offset
    finally:
        client.close()


def committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """The group's committed offset of a partition (OffsetFetch with require_stable, as a
    read_committed librdkafka consumer asks it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed"})
    try:
        return int(c.committed([TopicPartition(topic, partition)], TIMEOUT_S)[0].offset)
    finally:
        c.close()


def lso(bootstrap: str, topic: str, partition: int) -> int:
    """The last stable offset as a read_committed consumer's ListOffsets(LATEST) answers."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                  "isolation.level": "read_committed"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), 5,
                                           cached=False)[1])
    finally:
        c.close()


def test_commit_and_abort_visibility(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap)
    p = producer(bootstrap, f"vis-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=f"c1-{i}", partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=f"a-{i}", partition=i % 2)
    p.flush(TIMEOUT_S)
    # open: read_committed stops at the transaction's first offset on both partitions
    assert lso(bootstrap, topic, 0) == 4 and lso(bootstrap, topic, 1) == 4
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value="c2", partition=0)
    p.commit_transaction(TIMEOUT_S)
    kept = {f"c1-{i}" for i in range(6)} | {"c2"}
    got = read_all(bootstrap, topic, 2, "read_committed", expect=7)
    assert sorted(got) == sorted(kept)
    everything = read_all(bootstrap, topic, 2, "read_uncommitted", expect=13)
    assert set(everything) == kept | {f"a-{i}" for i in range(6)}
    # no stray record arrived after the expected ones
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", wait_s=1.0)) == sorted(
        kept)


def test_second_instance_fences_the_first(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    tid = f"fence-{uuid.uuid4().hex[:6]}"
    first = producer(bootstrap, tid)
    first.begin_transaction()
    first.produce(topic, value="zombie")
    first.flush(TIMEOUT_S)
    second = producer(bootstrap, tid)  # aborts the first's open transaction
    second.begin_transaction()
    second.produce(topic, value="live")
    second.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                           KafkaError.INVALID_PRODUCER_EPOCH)
    assert read_all(bootstrap, topic, 1, "read_committed", expect=1) == ["live"]


def test_abandoned_transaction_times_out(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    p = producer(bootstrap, f"abandon-{uuid.uuid4().hex[:6]}", **{
        "transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, value="never")
    p.flush(TIMEOUT_S)
    assert lso(bootstrap, topic, 0) == 0
    deadline = time.monotonic() + TIMEOUT_S
    while lso(bootstrap, topic, 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lso(bootstrap, topic, 0) == 2  # the record and the abort marker
    assert read_all(bootstrap, topic, 1, "read_committed", wait_s=1.0) == []


def test_kill_mid_transaction_then_restart(txn_broker: BrokerProcess) -> None:
    """A committed transaction survives kill -9; one open at the kill is aborted by its
    timeout once the restarted coordinator reloads it."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    p = producer(bootstrap, f"kill-{uuid.uuid4().hex[:6]}", **{
        "transaction.timeout.ms": 3000, "acks": "all"})
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=f"kept-{i}", partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=f"lost-{i}", partition=i % 2)
    p.flush(TIMEOUT_S)
    txn_broker.kill()
    txn_broker.start()
    kept = {f"kept-{i}" for i in range(4)}
    deadline = time.monotonic() + TIMEOUT_S
    while (lso(bootstrap, topic, 0), lso(bootstrap, topic, 1)) != (6, 6) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (lso(bootstrap, topic, 0), lso(bootstrap, topic, 1)) == (6, 6)
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", wait_s=1.0)) == sorted(kept)


def _poll(c: Consumer, n: int) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == n, f"polled {len(got)} of {n}"
    return got


def _app(bootstrap: str, source: str, group: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe([source])
    return c


def _process(p: Producer, c: Consumer, sink: str, n: int, commit: bool = True) -> None:
    """One transaction: ``n`` records read, transformed, written, their offsets sent."""
    p.begin_transaction()
    for m in _poll(c, n):
        p.produce(sink, value=b"out-" + m.value())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(),
                                  TIMEOUT_S)
    if commit:
        p.commit_transaction(TIMEOUT_S)
    else:
        p.flush(TIMEOUT_S)


def test_consume_transform_produce_exactly_once_across_a_fencing_restart(
        txn_broker: BrokerProcess) -> None:
    """An application commits 10 of 20 inputs in transactions, then dies inside its third
    (its outputs and offsets written, not committed); its replacement (same
    transactional.id) fences it, resumes from the committed offsets and finishes. Committed
    output: every input exactly once; the zombie's commit is refused."""
    bootstrap = txn_broker.bootstrap
    source, sink = make_topic(bootstrap, 1), make_topic(bootstrap, 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        plain.produce(source, value=b"%02d" % i)
    plain.flush(TIMEOUT_S)
    group, tid = f"eos-{uuid.uuid4().hex[:6]}", f"eos-{uuid.uuid4().hex[:6]}"
    c1, p1 = _app(bootstrap, source, group), producer(bootstrap, tid)
    _process(p1, c1, sink, 5)
    _process(p1, c1, sink, 5)
    _process(p1, c1, sink, 5, commit=False)  # dies here
    c1.close()
    p2 = producer(bootstrap, tid)  # fences p1, aborting its transaction
    with pytest.raises(KafkaException):
        p1.commit_transaction(TIMEOUT_S)
    c2 = _app(bootstrap, source, group)
    _process(p2, c2, sink, 5)
    _process(p2, c2, sink, 5)
    assert c2.committed([TopicPartition(source, 0)], TIMEOUT_S)[0].offset == 20
    c2.close()
    want = [f"out-{i:02d}" for i in range(20)]
    assert sorted(read_all(bootstrap, sink, 1, "read_committed", expect=20)) == want
    assert sorted(read_all(bootstrap, sink, 1, "read_committed", wait_s=1.0)) == want
    # the zombie's outputs are in the log, aborted
    assert len(read_all(bootstrap, sink, 1, "read_uncommitted", expect=25)) == 25
    # kill -9 and restart: the offsets committed in transactions are reloaded with them
    txn_broker.kill()
    txn_broker.start()
    assert committed(bootstrap, group, source) == 20
    assert sorted(read_all(bootstrap, sink, 1, "read_committed", expect=20)) == want


def test_offset_fetch_require_stable_while_offsets_are_pending(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    group = f"stable-{uuid.uuid4().hex[:6]}"
    p = producer(bootstrap, f"stable-{uuid.uuid4().hex[:6]}")
    p.begin_transaction()
    p.produce(topic, value="x")
    meta = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                  meta.consumer_group_metadata(), TIMEOUT_S)
    client = WireClient(bootstrap)
    try:
        def fetch(stable: bool) -> tuple[int, int]:
            resp = call(client, ApiKey.OFFSET_FETCH, 7, group_id=group, require_stable=stable,
                        topics=[{"name": topic, "partition_indexes": [0]}])
            part = resp.topics[0].partitions[0]
            return int(part.error_code), int(part.committed_offset)
        assert fetch(True) == (ErrorCode.unstable_offset_commit, -1)
        assert fetch(False) == (ErrorCode.none, -1)
        p.commit_transaction(TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S  # the markers follow EndTxn's answer
        while fetch(True)[0] == ErrorCode.unstable_offset_commit \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fetch(True) == (ErrorCode.none, 1)
    finally:
        client.close()
        meta.close()


def test_aiokafka_transactions(txn_broker: BrokerProcess) -> None:
    """aiokafka's transactional producer (v1 APIs) commits, aborts and sends offsets; its
    read_committed consumer and librdkafka's see the committed records only."""
    bootstrap = txn_broker.bootstrap
    topic, source = make_topic(bootstrap, 1), make_topic(bootstrap, 1)
    group = f"aio-{uuid.uuid4().hex[:6]}"

    async def scenario() -> list[str]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                             transactional_id=f"aio-{uuid.uuid4().hex[:6]}")
        await p.start()
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send_and_wait(topic, f"c-{i}".encode(), partition=0)
                await p.send_offsets_to_transaction({AioTp(source, 0): 4}, group)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aborted", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"c-last", partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            c.assign([AioTp(topic, 0)])
            got: list[str] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 4 and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=200)).values():
                    got.extend(r.value.decode() for r in records)
            return got
        finally:
            await c.stop()

    got = asyncio.run(asyncio.wait_for(scenario(), 60))
    want = ["c-0", "c-1", "c-2", "c-last"]
    assert got == want
    assert read_all(bootstrap, topic, 1, "read_committed", expect=4) == want
    assert committed(bootstrap, group, source) == 4


def test_txn_offset_commit_fenced_after_a_rebalance(txn_broker: BrokerProcess) -> None:
    """KIP-447: offsets sent with the group metadata of a generation the group has left
    behind are refused (the zombie's transaction must abort); with the current metadata
    they commit."""
    bootstrap = txn_broker.bootstrap
    source = make_topic(bootstrap, 2)
    group = f"fence-g-{uuid.uuid4().hex[:6]}"

    def member() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "session.timeout.ms": 6000, "enable.auto.commit": False,
                      "isolation.level": "read_committed"})
        c.subscribe([source])
        return c

    def assigned(*cs: Consumer) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            for c in cs:
                c.poll(0.1)
            if all(c.assignment() for c in cs):
                return
        raise AssertionError("no assignment")

    c1 = member()
    assigned(c1)
    stale = c1.consumer_group_metadata()
    c2 = member()
    assigned(c1, c2)  # a new generation
    p = producer(bootstrap, f"fence-t-{uuid.uuid4().hex[:6]}")
    try:
        p.begin_transaction()
        with pytest.raises(KafkaException) as raised:
            p.send_offsets_to_transaction([TopicPartition(source, 0, 3)], stale, TIMEOUT_S)
        assert raised.value.args[0].code() in (KafkaError.ILLEGAL_GENERATION,
                                               KafkaError.UNKNOWN_MEMBER_ID)
        p.abort_transaction(TIMEOUT_S)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(source, 0, 3)],
                                      c1.consumer_group_metadata(), TIMEOUT_S)
        p.commit_transaction(TIMEOUT_S)
    finally:
        c1.close()
        c2.close()
    assert committed(bootstrap, group, source) == 3


def test_samsa_consumer_read_committed(txn_broker: BrokerProcess) -> None:
    """samsa's own Consumer with isolation_level=read_committed: librdkafka's committed
    transactions only, interleaved with aborted ones and plain records; end_offsets and
    "latest" are the last stable offset."""
    import samsa

    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    p = producer(bootstrap, f"samsa-rc-{uuid.uuid4().hex[:6]}")
    plain = Producer({"bootstrap.servers": bootstrap})
    want = []
    for round_ in range(3):
        p.begin_transaction()
        p.produce(topic, value=f"c-{round_}", partition=0)
        p.commit_transaction(TIMEOUT_S)
        want.append(f"c-{round_}")
        p.begin_transaction()
        p.produce(topic, value=f"a-{round_}", partition=0)
        p.flush(TIMEOUT_S)
        plain.produce(topic, value=f"p-{round_}", partition=0)  # inside the aborted span
        plain.flush(TIMEOUT_S)
        want.append(f"p-{round_}")
        p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value="open", partition=0)
    p.flush(TIMEOUT_S)
    tp = samsa.TopicPartition(topic, 0)
    with samsa.Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                        enable_auto_commit=False) as c:
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(want) and time.monotonic() < deadline:
            got.extend(r.value.decode() for r in c.poll(200))
        assert got == want
        lso_now = c.end_offsets([tp])[tp]
        assert lso_now == lso(bootstrap, topic, 0) < c.position(tp) + 2
    with samsa.Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as c:
        assert c.end_offsets([tp])[tp] > lso_now  # read_uncommitted: the high watermark
    p.abort_transaction(TIMEOUT_S)


def _offset_for_time(bootstrap: str, topic: str, ts: int, isolation: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "times",
                  "isolation.level": isolation})
    try:
        return int(c.offsets_for_times([TopicPartition(topic, 0, ts)], TIMEOUT_S)[0].offset)
    finally:
        c.close()


def test_read_committed_offsets_for_times_stop_at_the_last_stable_offset(
        txn_broker: BrokerProcess) -> None:
    """ListOffsets by timestamp, read_committed: an offset of an open transaction is not
    found (Kafka caps the lookup at the last stable offset); read_uncommitted finds it."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    p = producer(bootstrap, f"lo-{uuid.uuid4().hex[:6]}")
    ts = int(time.time() * 1000)
    p.begin_transaction()
    p.produce(topic, value="open", partition=0, timestamp=ts)
    p.flush(TIMEOUT_S)
    assert _offset_for_time(bootstrap, topic, ts, "read_uncommitted") == 0
    assert _offset_for_time(bootstrap, topic, ts, "read_committed") == -1
    p.commit_transaction(TIMEOUT_S)
    assert _offset_for_time(bootstrap, topic, ts, "read_committed") == 0


def test_next_transaction_waits_for_the_markers_instead_of_a_retry(
        txn_broker: BrokerProcess) -> None:
    """AddPartitionsToTxn sent right after EndTxn was answered (its markers still being
    written) is answered NONE once they are, not CONCURRENT_TRANSACTIONS (which would send
    the client into its retry backoff after every small transaction)."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    tid = f"next-{uuid.uuid4().hex[:6]}"
    client = WireClient(bootstrap)
    try:
        init = None
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:  # the first request creates __transaction_state
            init = call(client, ApiKey.INIT_PRODUCER_ID, 1, transactional_id=tid,
                        transaction_timeout=10_000)
            if init.error_code == ErrorCode.none:
                break
            time.sleep(0.1)
        assert init is not None and init.error_code == ErrorCode.none
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        topics = [{"name": topic, "partitions": [0, 1]}]
        for _ in range(5):
            added = call(client, ApiKey.ADD_PARTITIONS_TO_TXN, 1,
                         v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics)
            codes = {p.partition_error_code for t in added.results_by_topic_v3_and_below
                     for p in t.results_by_partition}
            assert codes == {ErrorCode.none}
            ended = call(client, ApiKey.END_TXN, 1, transactional_id=tid, producer_id=pid,
                         producer_epoch=epoch, committed=True)
            assert ended.error_code == ErrorCode.none
    finally:
        client.close()
