"""KIP-890 part 1 on one node: a partition's leader verifies with the transaction
coordinator that a transactions-v1 producer's first transactional batch belongs to its open
transaction (``transaction.partition.verification.enable``, default true). librdkafka's
pipelined transactions still commit and abort as before; a raw Produce v3-11 for a
partition never added gets INVALID_TXN_STATE (v11 TRANSACTION_ABORTABLE) and nothing is
appended; a late produce after its transaction was aborted cannot open a hanging
transaction; TxnOffsetCommit v0-4 for a group whose offsets partition was never added is
refused; AddPartitionsToTxn v4-5 (the brokers' batched form, ``verify_only``) answers
per transaction and partition; with the setting turned off at run time (a dynamic broker
config, through confluent-kafka's AdminClient) the old behaviour holds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.records import BatchBuilder
from tests.broker.test_group_api_versions import call
from tests.brokerproc import BrokerProcess
from tests.conformance.test_transactions import (
    CONFIG,
    TIMEOUT_S,
    batches,
    committed,
    lso,
    make_topic,
    producer,
    read_all,
)
from tests.wire import WireClient

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

VERIFICATION = "transaction.partition.verification.enable"


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("verify") / "data", CONFIG).start()
    yield proc
    proc.kill()


class Txn:
    """A transactional producer spoken on the wire (transactions v1, as librdkafka)."""

    def __init__(self, bootstrap: str, tid: str | None = None) -> None:
        self.client = WireClient(bootstrap)
        self.tid = tid or f"v-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # the coordinator starts on the first transactional id
            init = call(self.client, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=self.tid,
                        transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
            if int(init.error_code) not in (ErrorCode.coordinator_not_available,
                                            ErrorCode.coordinator_load_in_progress):
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert int(init.error_code) == 0
        self.pid, self.epoch = int(init.producer_id), int(init.producer_epoch)
        self.seq: dict[tuple[str, int], int] = {}

    def add(self, topic: str, *partitions: int) -> int:
        resp = call(self.client, ApiKey.ADD_PARTITIONS_TO_TXN, 3,
                    v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
                    v3_and_below_producer_epoch=self.epoch, v3_and_below_topics=[
                        {"name": topic, "partitions": list(partitions)}])
        codes = {int(r.partition_error_code) for t in resp.results_by_topic_v3_and_below
                 for r in t.results_by_partition}
        (code,) = codes
        return code

    def produce(self, topic: str, partition: int, version: int = 9, value: bytes = b"v",
                via: WireClient | None = None) -> int:
        """One transactional batch (sent ``via`` the partition's leader on a cluster); its
        error code (the sequence moves on when it is 0)."""
        seq = self.seq.get((topic, partition), 0)
        builder = BatchBuilder()
        builder.append(None, None, value, None)
        batch = builder.build(producer_id=self.pid, producer_epoch=self.epoch,
                              base_sequence=seq, transactional=True)
        resp = call(via or self.client, ApiKey.PRODUCE, version, transactional_id=self.tid,
                    acks=-1,
                    timeout=10000, topic_data=[{"name": topic, "partition_data": [
                        {"index": partition, "records": batch}]}])
        code = int(resp.responses[0].partition_responses[0].error_code)
        if code == 0:
            self.seq[(topic, partition)] = seq + 1
        return code

    def add_offsets(self, group: str) -> int:
        return int(call(self.client, ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id=self.tid,
                        producer_id=self.pid, producer_epoch=self.epoch,
                        group_id=group).error_code)

    def commit_offsets(self, group: str, topic: str, offset: int, version: int = 3) -> int:
        """TxnOffsetCommit of ``topic``-0 (as a group's coordinator answers it)."""
        resp = call(self.client, ApiKey.TXN_OFFSET_COMMIT, version, transactional_id=self.tid,
                    group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
                    generation_id=-1, member_id="", group_instance_id=None, topics=[{
                        "name": topic, "partitions": [{
                            "partition_index": 0, "committed_offset": offset,
                            "committed_leader_epoch": -1, "committed_metadata": ""}]}])
        return int(resp.topics[0].partitions[0].error_code)

    def end(self, commit: bool) -> int:
        resp = call(self.client, ApiKey.END_TXN, 3, transactional_id=self.tid,
                    producer_id=self.pid, producer_epoch=self.epoch, committed=commit)
        return int(resp.error_code)

    def close(self) -> None:
        self.client.close()


def set_verification(bootstrap: str, on: bool) -> None:
    """Turn verification on or off for broker 0 (its dynamic setting)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[ConfigEntry(
        VERIFICATION, "true" if on else "false",
        incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def test_librdkafka_pipelined_transactions_commit_and_abort(txn_broker: BrokerProcess
                                                             ) -> None:
    """librdkafka (transactions v1) with verification on: many pipelined batches on three
    partitions per transaction, the first of each verified, keep their order (no
    OUT_OF_ORDER_SEQUENCE_NUMBER, no error at all); committed ones are read, aborted
    ones are not."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 3)
    p = producer(bootstrap, f"rd-{uuid.uuid4().hex[:6]}", **{"linger.ms": 0,
                                                              "batch.num.messages": 5})
    errors: list[tuple[int, Any]] = []
    kept: set[str] = set()
    for n in range(4):
        p.begin_transaction()
        for i in range(300):
            p.produce(topic, value=f"{n}-{i}", partition=i % 3,
                      on_delivery=lambda err, _m, n=n: err and errors.append((n, err)))
            p.poll(0)
        if n % 2:  # an abort purges what was not sent yet
            p.abort_transaction(TIMEOUT_S)
        else:
            p.commit_transaction(TIMEOUT_S)
            kept |= {f"{n}-{i}" for i in range(300)}
    p.flush(TIMEOUT_S)
    assert [e for n, e in errors if n % 2 == 0] == []
    got = read_all(bootstrap, topic, 3, "read_committed", expect=len(kept))
    assert sorted(got) == sorted(kept)


def test_produce_to_a_partition_never_added_is_refused(txn_broker: BrokerProcess) -> None:
    """Produce v3-11 of a transactional batch for a partition no AddPartitionsToTxn added:
    refused (INVALID_TXN_STATE; v11 TRANSACTION_ABORTABLE, as Kafka 4.x) and nothing is
    appended; the partition added is written."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    txn = Txn(bootstrap)
    try:
        assert txn.add(topic, 0) == 0
        for version in range(3, 12):
            expected = (ErrorCode.transaction_abortable if version == 11
                        else ErrorCode.invalid_txn_state)
            assert (version, txn.produce(topic, 1, version)) == (version, expected)
        assert batches(bootstrap, topic, 1) == []
        assert txn.produce(topic, 0, 9) == 0
        assert txn.produce(topic, 0, 11) == 0  # open here now: not asked again
        assert txn.end(commit=True) == 0
        assert [h.record_count for h in batches(bootstrap, topic, 0)
                if not h.is_control] == [1, 1]
    finally:
        txn.close()


def test_a_late_produce_after_an_abort_opens_no_hanging_transaction(
        txn_broker: BrokerProcess) -> None:
    """The hanging transaction KIP-890 prevents: a batch of a transaction that was already
    aborted (a retry delayed past the abort) would open a transaction on its partition that
    no coordinator will end, holding read_committed consumers back for good. Verified, it
    is refused and the last stable offset stays at the end of the log."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    txn = Txn(bootstrap)
    try:
        assert txn.add(topic, 0) == 0
        assert txn.produce(topic, 0) == 0
        assert txn.end(commit=False) == 0
        deadline = time.monotonic() + TIMEOUT_S
        while lso(bootstrap, topic, 0) != 2:  # the record and its abort marker
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert txn.produce(topic, 0) == ErrorCode.invalid_txn_state
        assert len(batches(bootstrap, topic, 0)) == 2
        assert lso(bootstrap, topic, 0) == 2
        # the producer's next transaction is verified again and goes on
        assert txn.add(topic, 0) == 0
        assert txn.produce(topic, 0) == 0
        assert txn.end(commit=True) == 0
        assert read_all(bootstrap, topic, 1, "read_committed", expect=1) == ["v"]
    finally:
        txn.close()


def test_offsets_of_a_group_never_added_are_refused(txn_broker: BrokerProcess) -> None:
    """TxnOffsetCommit v0-4 (transactions v1) is verified too: without AddOffsetsToTxn the
    group's ``__consumer_offsets`` partition is not in the transaction, so its offsets are
    refused (INVALID_TXN_STATE; v4 TRANSACTION_ABORTABLE) and never staged; after it they
    are staged and committed with the transaction."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 1)
    group = f"g-{topic}"
    txn = Txn(bootstrap)
    try:
        assert txn.add(topic, 0) == 0
        assert txn.commit_offsets(group, topic, 5, 3) == ErrorCode.invalid_txn_state
        assert txn.commit_offsets(group, topic, 5, 4) == ErrorCode.transaction_abortable
        assert txn.add_offsets(group) == 0
        assert txn.commit_offsets(group, topic, 7, 3) == 0
        assert txn.produce(topic, 0) == 0
        assert txn.end(commit=True) == 0
        deadline = time.monotonic() + TIMEOUT_S
        while committed(bootstrap, group, topic) != 7:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        txn.close()


def _verify(client: WireClient, version: int, *txns: dict[str, Any]) -> dict[
        str, dict[tuple[str, int], int]]:
    resp = call(client, ApiKey.ADD_PARTITIONS_TO_TXN, version, transactions=list(txns))
    assert int(resp.error_code) == 0
    return {r.transactional_id: {(t.name, int(p.partition_index)): int(p.partition_error_code)
                                 for t in r.topic_results for p in t.results_by_partition}
            for r in resp.results_by_transaction}


def test_add_partitions_to_txn_v4_and_v5_from_brokers(txn_broker: BrokerProcess) -> None:
    """The brokers' batched AddPartitionsToTxn: several transactions in one request, each
    answered per partition; ``verify_only`` writes nothing and names the partitions outside
    the transaction (v4 INVALID_TXN_STATE, v5 TRANSACTION_ABORTABLE); without it they are
    added; an unknown id is INVALID_PRODUCER_ID_MAPPING, an unknown partition
    UNKNOWN_TOPIC_OR_PARTITION (the others of its transaction OPERATION_NOT_ATTEMPTED)."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 3)
    txn = Txn(bootstrap)
    client = WireClient(bootstrap)

    def ask(tid: str, pid: int, epoch: int, partitions: list[int], verify: bool = True,
            name: str = topic) -> dict[str, Any]:
        return {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "verify_only": verify, "topics": [{"name": name, "partitions": partitions}]}

    try:
        assert txn.add(topic, 0) == 0
        lost = f"lost-{uuid.uuid4().hex[:6]}"
        for version, outside in ((4, ErrorCode.invalid_txn_state),
                                 (5, ErrorCode.transaction_abortable)):
            got = _verify(client, version, ask(txn.tid, txn.pid, txn.epoch, [0, 1]),
                          ask(lost, txn.pid, 0, [0]))
            assert got == {txn.tid: {(topic, 0): 0, (topic, 1): outside},
                           lost: {(topic, 0): ErrorCode.invalid_producer_id_mapping}}
        assert _verify(client, 5, ask(txn.tid, txn.pid, txn.epoch + 1, [0])) == {
            txn.tid: {(topic, 0): ErrorCode.producer_fenced}}
        assert _verify(client, 5, {**ask(txn.tid, txn.pid, txn.epoch, [0]), "topics": [
            {"name": topic, "partitions": [0]}, {"name": "nope", "partitions": [0]}]}) == {
            txn.tid: {(topic, 0): ErrorCode.operation_not_attempted,
                      ("nope", 0): ErrorCode.unknown_topic_or_partition}}
        # without verify_only the partitions join the transaction
        assert _verify(client, 4, ask(txn.tid, txn.pid, txn.epoch, [2], verify=False)) == {
            txn.tid: {(topic, 2): 0}}
        assert _verify(client, 5, ask(txn.tid, txn.pid, txn.epoch, [2])) == {
            txn.tid: {(topic, 2): 0}}
        assert txn.produce(topic, 2) == 0
        assert txn.end(commit=True) == 0
    finally:
        client.close()
        txn.close()


def test_verification_off_keeps_the_old_behaviour(txn_broker: BrokerProcess) -> None:
    """``transaction.partition.verification.enable=false`` (set at run time): a batch for a
    partition never added is appended and opens a transaction there, as before KIP-890;
    turned on again, the next one is refused."""
    bootstrap = txn_broker.bootstrap
    topic = make_topic(bootstrap, 2)
    txn = Txn(bootstrap)
    set_verification(bootstrap, False)
    try:
        assert txn.produce(topic, 1) == 0
        assert [h.is_transactional for h in batches(bootstrap, topic, 1)] == [True]
        assert lso(bootstrap, topic, 1) == 0  # open, and its coordinator does not know it
    finally:
        set_verification(bootstrap, True)
    try:
        assert txn.produce(topic, 0) == ErrorCode.invalid_txn_state
        assert batches(bootstrap, topic, 0) == []
    finally:
        txn.close()
