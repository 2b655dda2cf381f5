"""samsa's own transactional producer (``samsa.Producer(transactional_id=...)``) over TCP,
with transactions v2 (KIP-890, samsa's default) and v1 (the feature at 0): its commits and
aborts as librdkafka's and the Java client's read_committed consumers see them, offsets sent
to a transaction visible to the group only once it commits, and consume-transform-produce
with ``samsa.Consumer`` exactly once across a second instance that fences the first."""

from __future__ import annotations

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

import samsa
from samsa import TopicPartition
from samsa.client.errors import (
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
)
from tests.brokerproc import BrokerProcess
from tests.conformance import test_java_transactions
from tests.conformance.javakit import JavaKit
from tests.conformance.test_transactions import (
    TIMEOUT_S,
    batches,
    committed,
    make_topic,
    read_all,
)

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

txn_broker = test_java_transactions.txn_broker
"""A broker per test with transactions v2 and one with v1 (the Java tests' fixture)."""


def transactional(bootstrap: str, tid: str) -> samsa.Producer:
    p = samsa.Producer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=1)
    p.init_transactions(TIMEOUT_S)
    return p


def test_commit_abort_and_offsets_as_rdkafka_and_java_read_them(
        txn_broker: BrokerProcess, java: JavaKit) -> None:
    bootstrap = txn_broker.bootstrap
    topic, source = make_topic(bootstrap, 2), make_topic(bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    p = transactional(bootstrap, f"vis-{uuid.uuid4().hex[:6]}")
    with pytest.raises(IllegalStateError):
        p.send(topic, b"outside", partition=0)  # no transaction open
    p.begin_transaction()
    for i in range(6):
        p.send(topic, f"c1-{i}".encode(), partition=i % 2)
    p.send_offsets_to_transaction({TopicPartition(source, 0): 7}, group, TIMEOUT_S)
    p.flush(TIMEOUT_S)
    # sent, not committed: invisible to read_committed, and the offsets are pending
    assert read_all(bootstrap, topic, 2, "read_committed", wait_s=1.0) == []
    with samsa.Admin(bootstrap) as admin:  # OffsetFetch without require_stable
        assert admin.list_consumer_group_offsets(group) == {}
    p.commit_transaction(TIMEOUT_S)
    assert committed(bootstrap, group, source) == 7
    p.begin_transaction()
    for i in range(4):
        p.send(topic, f"aborted-{i}".encode(), partition=i % 2)
    p.send_offsets_to_transaction({TopicPartition(source, 0): 99}, group, TIMEOUT_S)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.send(topic, b"c2", partition=0)
    p.commit_transaction(TIMEOUT_S)
    p.close()
    kept = sorted([f"c1-{i}" for i in range(6)] + ["c2"])
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", expect=7)) == kept
    assert len(read_all(bootstrap, topic, 2, "read_uncommitted", expect=11)) == 11
    events = java.run("ReadAll", bootstrap, topic, "isolation.level=read_committed")
    assert sorted(e["value"] for e in events if e["event"] == "record") == kept
    assert committed(bootstrap, group, source) == 7  # the aborted offsets were dropped
    data = [h for h in batches(bootstrap, topic, 0) if not h.is_control]
    assert all(h.is_transactional for h in data)
    # three transactions wrote to partition 0: v2 bumps the epoch at each end, v1 does not
    tv2 = txn_broker.config["transaction.version"] == "2"
    assert len({h.producer_epoch for h in data}) == (3 if tv2 else 1)


def _process(p: samsa.Producer, c: samsa.Consumer, sink: str, count: int,
             commit: bool = True) -> None:
    """Consume ``count`` inputs, write one output each and the consumer's next offsets in
    one transaction."""
    p.begin_transaction()
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < count:
        assert time.monotonic() < deadline, f"only {got} of {count} inputs"
        for r in c.poll(200, max_records=count - got):
            p.send(sink, b"out-" + r.value, partition=0)
            got += 1
    positions = {tp: c.position(tp) for tp in c.assignment()}
    p.send_offsets_to_transaction(positions, c.group_metadata(), TIMEOUT_S)
    if commit:
        p.commit_transaction(TIMEOUT_S)
    else:
        p.flush(TIMEOUT_S)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_exactly_once_across_a_fencing_instance(
        txn_broker: BrokerProcess, protocol: str) -> None:
    """samsa.Consumer + samsa.Producer commit 10 of 20 inputs, then stall inside their
    third transaction; a second instance (same transactional id, same group) fences the
    first, resumes from the committed offsets and finishes. Committed output: every input
    exactly once; the zombie is refused. With either group protocol (the group metadata
    carries the generation, or the KIP-848 member epoch)."""
    bootstrap = txn_broker.bootstrap
    source, sink = make_topic(bootstrap, 1), make_topic(bootstrap, 1)
    with samsa.Producer(bootstrap_servers=bootstrap) as plain:
        for i in range(20):
            plain.send(source, b"%02d" % i, partition=0)
    group, tid = f"eos-{uuid.uuid4().hex[:6]}", f"eos-{uuid.uuid4().hex[:6]}"

    def app() -> samsa.Consumer:
        timeouts = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500} \
            if protocol == "classic" else {}
        return samsa.Consumer(source, bootstrap_servers=bootstrap, group_id=group,
                              isolation_level="read_committed", enable_auto_commit=False,
                              auto_offset_reset="earliest", group_protocol=protocol,
                              **timeouts)

    c1, p1 = app(), transactional(bootstrap, tid)
    _process(p1, c1, sink, 5)
    meta = c1.group_metadata()
    assert meta.group_id == group and meta.generation_id > 0 and meta.member_id
    _process(p1, c1, sink, 5)
    _process(p1, c1, sink, 5, commit=False)  # stalls here
    c1.close(autocommit=False)
    p2 = transactional(bootstrap, tid)  # fences p1, aborting its transaction
    with pytest.raises(ProducerFencedError):
        p1.commit_transaction(TIMEOUT_S)
    with pytest.raises(ProducerFencedError):
        p1.send(sink, b"zombie", partition=0)
    p1.close()
    c2 = app()
    _process(p2, c2, sink, 5)
    _process(p2, c2, sink, 5)
    c2.close(autocommit=False)
    p2.close()
    assert committed(bootstrap, group, source) == 20
    want = [f"out-{i:02d}" for i in range(20)]
    assert sorted(read_all(bootstrap, sink, 1, "read_committed", expect=20)) == want
    assert sorted(read_all(bootstrap, sink, 1, "read_committed", wait_s=1.0)) == want
    # the zombie's outputs are in the log, aborted
    assert len(read_all(bootstrap, sink, 1, "read_uncommitted", expect=25)) == 25


def test_a_transaction_past_its_timeout_is_aborted_and_the_producer_fenced(
        txn_broker: BrokerProcess) -> None:
    """``transaction_timeout_ms`` reaches the coordinator (InitProducerId): it aborts the
    transaction left open past it and bumps the epoch, so the late commit is fenced."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    p = samsa.Producer(bootstrap_servers=bootstrap, transactional_id=f"slow-{topic}",
                       transaction_timeout_ms=1000)
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.send(topic, b"late", partition=0)
    p.flush(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    with samsa.Admin(bootstrap) as admin:
        while admin.describe_transactions([f"slow-{topic}"])[f"slow-{topic}"].state not in (
                "CompleteAbort", "Empty"):
            assert time.monotonic() < deadline, "the coordinator did not time it out"
            time.sleep(0.2)
    with pytest.raises(ProducerFencedError):
        p.commit_transaction(TIMEOUT_S)
    assert p.transaction_state == "FATAL_ERROR"
    p.close()
    assert read_all(bootstrap, topic, 1, "read_committed", wait_s=1.0) == []
    assert read_all(bootstrap, topic, 1, "read_uncommitted", expect=1) == ["late"]


def test_large_transactions_with_pipelined_requests(txn_broker: BrokerProcess) -> None:
    """Transactions of 5,000 records: the producer keeps up to 5 Produce requests in
    flight, and each transaction's first ones reach the broker together (under v2 the first
    one waits for its partition's addition to be durable, and the others must not append
    before it)."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    p = transactional(bootstrap, f"big-{topic}")
    value = b"x" * 100
    for _ in range(3):
        p.begin_transaction()
        futures = [p.send(topic, value, partition=0) for _ in range(5000)]
        p.commit_transaction(TIMEOUT_S)
        assert all(f.succeeded() for f in futures)
    p.close()
    data = [h for h in batches(bootstrap, topic, 0) if not h.is_control]
    assert sum(h.record_count for h in data) == 15000
    assert all(h.is_transactional for h in data)


def test_a_failed_batch_makes_the_transaction_abortable(txn_broker: BrokerProcess) -> None:
    """A batch the broker refuses (MESSAGE_TOO_LARGE) fails its records and the
    transaction: commit raises TransactionAbortableError; after abort_transaction (under
    v1 with an epoch bump, the refused batch having taken sequence numbers) the next
    transaction commits, and read_committed sees only it."""
    bootstrap = txn_broker.bootstrap
    topic = f"small-{uuid.uuid4().hex[:8]}"
    with samsa.Admin(bootstrap) as admin:
        admin.create_topics({topic: 1}, configs={topic: {"max.message.bytes": "1000"}})
    p = transactional(bootstrap, f"fail-{topic}")
    p.begin_transaction()
    ok = p.send(topic, b"small-1", partition=0)
    ok.result(TIMEOUT_S)
    too_big = p.send(topic, b"x" * 2000, partition=0)
    with pytest.raises(KafkaError) as refused:
        too_big.result(TIMEOUT_S)
    assert refused.value.code == ErrorCode.message_too_large
    with pytest.raises(TransactionAbortableError):
        p.send(topic, b"more", partition=0)
    with pytest.raises(TransactionAbortableError):
        p.commit_transaction(TIMEOUT_S)
    epoch = p._producer_epoch
    p.abort_transaction(TIMEOUT_S)
    assert p._producer_epoch == epoch + 1  # v1: InitProducerId; v2: EndTxn
    p.begin_transaction()
    p.send(topic, b"small-2", partition=0)
    p.commit_transaction(TIMEOUT_S)
    p.close()
    assert read_all(bootstrap, topic, 1, "read_committed", expect=1) == ["small-2"]
