"""KIP-664's repair of hanging transactions: a partition's open transaction that its
coordinator does not know (here a transactional batch whose transactional id never reached
the coordinator, as after losing its state) holds the last stable offset back and
read_committed consumers with it. ``samsa transactions find-hanging`` lists it (and not a
transaction its coordinator knows); Java's ``Admin.abortTransaction`` and ``samsa
transactions abort --start-offset`` write its abort marker (WriteTxnMarkers); the LSO moves
on and the librdkafka and Java read_committed consumers read the committed records after
it. And the broker's own retry of CONCURRENT_TRANSACTIONS for a Produce v12 sent right after
the previous transaction's end (KAFKA-18654), which keeps transactions v2 from waiting out
the client's retry backoff at every transaction. And offsets staged by a transaction no
coordinator knows, dropped by an abort marker on the group's ``__consumer_offsets``
partition."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

import samsa
from samsa import TopicPartition
from samsa.cli.main import main
from samsa.client.errors import KafkaError
from samsa.coordinator.hashing import partition_for
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.records import BatchBuilder
from tests.broker.test_group_api_versions import call
from tests.brokerproc import BrokerProcess
from tests.conformance.javakit import JavaKit
from tests.conformance.test_transactions import (
    CONFIG,
    TIMEOUT_S,
    lso,
    make_topic,
    read_all,
)
from tests.wire import WireClient

pytestmark = [pytest.mark.conformance, pytest.mark.slow]


@pytest.fixture
def txn_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker that does not verify transactional produce (KIP-890 part 1), so that a
    test can open a transaction its coordinator does not know, as before Kafka 3.6."""
    proc = BrokerProcess(tmp_path / "data", {
        **CONFIG, "transaction.partition.verification.enable": "false"}).start()
    yield proc
    proc.kill()


def hang(bootstrap: str, topic: str, partition: int) -> int:
    """Open a transaction on ``topic``-``partition`` that no coordinator knows: a
    transactional batch under a fresh producer id whose transactional id never registered
    (the broker does not verify it: ``transaction.partition.verification.enable=false``).
    Its producer id."""
    client = WireClient(bootstrap)
    try:
        pid = int(call(client, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None,
                       transaction_timeout=60000, producer_id=-1,
                       producer_epoch=-1).producer_id)
        builder = BatchBuilder()
        builder.append(None, None, b"hanging", None)
        batch = builder.build(producer_id=pid, producer_epoch=0, base_sequence=0,
                              transactional=True)
        resp = call(client, ApiKey.PRODUCE, 9, transactional_id=f"lost-{uuid.uuid4().hex[:6]}",
                    acks=-1, timeout=10000, topic_data=[{"name": topic, "partition_data": [
                        {"index": partition, "records": batch}]}])
        assert int(resp.responses[0].partition_responses[0].error_code) == 0
        return pid
    finally:
        client.close()


def cli(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        rc = main([*argv, "--bootstrap-server", bootstrap])
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["ok"], reply
    return reply


def test_hanging_transactions_found_and_aborted(txn_broker: BrokerProcess, java: JavaKit,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    lost = {p: hang(bootstrap, topic, p) for p in (0, 1)}
    p = samsa.Producer(bootstrap_servers=bootstrap, transactional_id=f"live-{topic}")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(6):
        p.send(topic, f"ok-{i}".encode(), partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    # committed after the hanging transactions: read_committed sees nothing yet
    assert lso(bootstrap, topic, 0) == 0 and lso(bootstrap, topic, 1) == 0
    assert read_all(bootstrap, topic, 2, "read_committed", wait_s=1.0) == []
    # a transaction its coordinator knows is open too, and is not hanging
    p.begin_transaction()
    p.send(topic, b"known", partition=0)
    p.flush(TIMEOUT_S)
    rc, out, err = cli(capsys, bootstrap, "transactions", "find-hanging", "--topic", topic,
                       "--max-transaction-timeout", "0", "-o", "json")
    assert rc == 0, err
    rows = json.loads(out)
    assert sorted((r["partition"], r["producer_id"], r["start_offset"]) for r in rows) == [
        (0, lost[0], 0), (1, lost[1], 0)]
    rc, out, _ = cli(capsys, bootstrap, "transactions", "find-hanging", "--topic", topic,
                     "-o", "json")  # 15 minutes by default: too young to tell
    assert rc == 0 and json.loads(out) == []
    p.abort_transaction(TIMEOUT_S)
    # Java's Admin: describeProducers shows the open transaction, abortTransaction ends it
    admin = java.start("AdminDriver", bootstrap)
    try:
        producers = ok(admin.request(f"describe-producers {topic}:0"))["producers"]
        (state,) = [s for s in producers if s["txn_start"] is not None]
        assert (state["producer_id"], state["txn_start"]) == (lost[0], 0)
        ok(admin.request(f"abort-transaction {topic}:0 {lost[0]} {state['epoch']} 0"))
    finally:
        admin.close()
    assert lso(bootstrap, topic, 0) > 0 and lso(bootstrap, topic, 1) == 0
    # the CLI, by the start offset find-hanging printed
    rc, _, err = cli(capsys, bootstrap, "transactions", "abort", "--topic", topic,
                     "--partition", "1", "--start-offset", "99")
    assert rc == 1 and "no open transaction starts at offset 99" in err
    rc, out, err = cli(capsys, bootstrap, "transactions", "abort", "--topic", topic,
                       "--partition", "1", "--start-offset", "0", "-o", "json")
    assert rc == 0, err
    assert json.loads(out)[0]["producer_id"] == lost[1]
    with samsa.Admin(bootstrap) as a:
        ends = a.list_offsets({TopicPartition(topic, i): "latest" for i in (0, 1)})
        assert {tp: lso(bootstrap, tp.topic, tp.partition) for tp in ends} == {
            tp: off for tp, (off, _) in ends.items()}  # the LSO is the end again
        # a marker older than the producer's epoch is refused (TV2 bumped it at each end)
        with pytest.raises(KafkaError) as refused:
            a.abort_transaction(TopicPartition(topic, 0), p._producer_id, 0)
        assert refused.value.code == ErrorCode.invalid_producer_epoch
    p.close()
    want = sorted(f"ok-{i}" for i in range(6))
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", expect=6)) == want
    events = java.run("ReadAll", bootstrap, topic, "isolation.level=read_committed")
    assert sorted(e["value"] for e in events if e["event"] == "record") == want
    rc, out, _ = cli(capsys, bootstrap, "transactions", "find-hanging", "--topic", topic,
                     "--max-transaction-timeout", "0", "-o", "json")
    assert rc == 0 and json.loads(out) == []


def test_tv2_produce_right_after_a_commit_waits_for_the_markers(
        txn_broker: BrokerProcess) -> None:
    """KIP-890 (Kafka 4.0, KAFKA-18654): the first Produce v12 of the next transaction,
    sent as soon as EndTxn v5 answered, meets the coordinator still writing the previous
    transaction's markers (CONCURRENT_TRANSACTIONS); the broker retries adding its
    partition itself (every 20 ms, up to 100 ms) instead of answering NOT_ENOUGH_REPLICAS
    and leaving the client to retry after its backoff (100 ms)."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    tid = f"quick-{topic}"
    client = WireClient(bootstrap)

    def produce(pid: int, epoch: int, seq: int) -> int:
        builder = BatchBuilder()
        builder.append(None, None, b"v", None)
        resp = call(client, ApiKey.PRODUCE, 12, transactional_id=tid, acks=-1, timeout=10000,
                    topic_data=[{"name": topic, "partition_data": [{"index": 0, "records":
                        builder.build(producer_id=pid, producer_epoch=epoch,
                                      base_sequence=seq, transactional=True)}]}])
        return int(resp.responses[0].partition_responses[0].error_code)

    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # the coordinator starts on the first transactional id
            init = call(client, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=tid,
                        transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
            if int(init.error_code) != ErrorCode.coordinator_not_available:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        codes = []
        for _ in range(5):
            codes.append(produce(pid, epoch, 0))
            end = call(client, ApiKey.END_TXN, 5, transactional_id=tid, producer_id=pid,
                       producer_epoch=epoch, committed=True)
            assert int(end.error_code) == 0
            epoch = int(end.producer_epoch)
        assert codes == [0] * 5
    finally:
        client.close()


def test_hanging_offsets_aborted_on_the_group_partition(txn_broker: BrokerProcess) -> None:
    """Offsets sent to a transaction its coordinator never knew (TxnOffsetCommit v3 alone)
    stay pending: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT. An abort
    marker written to the group's ``__consumer_offsets`` partition drops them, and the
    group's committed offset shows again."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    group = f"g-{topic}"
    client = WireClient(bootstrap)
    try:
        pid = int(call(client, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None,
                       transaction_timeout=60000, producer_id=-1,
                       producer_epoch=-1).producer_id)
        with samsa.Admin(bootstrap) as admin:
            admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 3})
        staged = call(client, ApiKey.TXN_OFFSET_COMMIT, 3, transactional_id=f"lost-{topic}",
                      group_id=group, producer_id=pid, producer_epoch=0, generation_id=-1,
                      member_id="", group_instance_id=None, topics=[{
                          "name": topic, "partitions": [{
                              "partition_index": 0, "committed_offset": 9,
                              "committed_leader_epoch": -1, "committed_metadata": ""}]}])
        assert int(staged.topics[0].partitions[0].error_code) == 0

        def fetch() -> tuple[int, int]:
            resp = call(client, ApiKey.OFFSET_FETCH, 7, group_id=group, require_stable=True,
                        topics=[{"name": topic, "partition_indexes": [0]}])
            part = resp.topics[0].partitions[0]
            return int(part.error_code), int(part.committed_offset)

        assert fetch()[0] == ErrorCode.unstable_offset_commit
        shard = partition_for(group, int(txn_broker.config.get(
            "offsets.topic.num.partitions", "50")))
        with samsa.Admin(bootstrap) as admin:
            admin.abort_transaction(TopicPartition("__consumer_offsets", shard), pid, 0)
        assert fetch() == (ErrorCode.none, 3)
    finally:
        client.close()
