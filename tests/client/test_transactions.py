"""The transactional producer's pure state machine (samsa.client.transactions): the requests
it sends for each user call under transactions v1 and v2, retries, fencing and abortable
errors, on a fake time line (``now`` in seconds)."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import (
    CommitFailedError,
    IllegalStateError,
    ProducerFencedError,
    TransactionAbortableError,
    error_for,
)
from samsa.client.transactions import (
    CONCURRENT_BACKOFF_S,
    ConsumerGroupMetadata,
    TransactionManager,
    TxnRequest,
    TxnState,
)
from samsa.protocol.api_keys import ApiKey

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
GROUP = ConsumerGroupMetadata("g", 7, "member-1", None)


def found(node: int = 1) -> NS:
    return NS(coordinators=[NS(error_code=0, node_id=node, host="h", port=9)])


def code(error: ErrorCode = ErrorCode.none, **more: Any) -> NS:
    return NS(error_code=int(error), **more)


def partitions(*results: tuple[TopicPartition, ErrorCode]) -> NS:
    return NS(results_by_topic_v3_and_below=[NS(name=tp.topic, results_by_partition=[
        NS(partition_index=tp.partition, partition_error_code=int(e))]) for tp, e in results])


def offsets(*results: tuple[TopicPartition, ErrorCode]) -> NS:
    return NS(topics=[NS(name=tp.topic, partitions=[
        NS(partition_index=tp.partition, error_code=int(e))]) for tp, e in results])


def take(m: TransactionManager, now: float = 0.0, done: bool = True) -> TxnRequest:
    request = m.next_request(now, done)
    assert request is not None, m.state
    return request


def ready(tv2: bool, epoch: int = 0) -> TransactionManager:
    """A manager past init_transactions, producer id 5."""
    m = TransactionManager("tid", 30000, retry_backoff_ms=100)
    op = m.init()
    assert take(m).kind == "find"
    m.on_response(found(), 0.0)
    init = take(m)
    assert (init.api_key, init.dest, init.body["transactional_id"],
            init.body["transaction_timeout"]) == (ApiKey.INIT_PRODUCER_ID, "transaction",
                                                  "tid", 30000)
    m.on_response(code(producer_id=5, producer_epoch=epoch), 0.0)
    m.tv2 = tv2
    assert op.done and op.error is None and m.state is TxnState.READY
    assert m.next_request(0.0, True) is None
    return m


def test_init_finds_the_transaction_coordinator_and_retries_while_it_loads() -> None:
    m = TransactionManager("tid", retry_backoff_ms=100)
    with pytest.raises(IllegalStateError):
        m.begin()
    op = m.init()
    find = take(m)
    assert (find.api_key, find.dest, find.body["key_type"], find.body["key"]) == (
        ApiKey.FIND_COORDINATOR, "any", 1, "tid")
    assert m.next_request(0.0, True) is None  # one request at a time
    m.on_response(found(), 0.0)
    assert take(m).kind == "init"
    m.on_response(code(ErrorCode.coordinator_load_in_progress), 1.0)
    assert m.next_request(1.05, True) is None and m.wait_time(1.05) == pytest.approx(0.05)
    assert take(m, 1.1).kind == "init"
    m.on_response(code(ErrorCode.not_coordinator), 1.2)
    assert m.coordinator is None
    assert take(m, 1.3).kind == "find"  # found again before the retry
    m.on_response(found(2), 1.3)
    assert take(m, 1.3).kind == "init" and m.coordinator is not None
    assert m.init() is op  # a call repeated after a timeout waits for the same answer
    m.on_response(code(producer_id=9, producer_epoch=3), 1.4)
    assert op.done and op.error is None
    assert (m.producer_id, m.producer_epoch, m.state) == (9, 3, TxnState.READY)


def test_tv1_adds_partitions_and_offsets_before_ending() -> None:
    m = ready(tv2=False)
    m.begin()
    m.add_partition(TP0)
    m.add_partition(TP1)
    assert not m.partition_ready(TP0)
    add = take(m)
    assert add.api_key == ApiKey.ADD_PARTITIONS_TO_TXN and add.max_version == 3
    assert add.body["v3_and_below_topics"] == [{"name": "t", "partitions": [0, 1]}]
    m.on_response(partitions((TP0, ErrorCode.concurrent_transactions),
                             (TP1, ErrorCode.operation_not_attempted)), 1.0)
    # the previous transaction is completing: asked again soon
    assert m.wait_time(1.0) == pytest.approx(CONCURRENT_BACKOFF_S)
    assert m.retry_backoff > CONCURRENT_BACKOFF_S
    take(m, 1.0 + CONCURRENT_BACKOFF_S)
    m.on_response(partitions((TP0, ErrorCode.none), (TP1, ErrorCode.none)), 1.03)
    assert m.partition_ready(TP0) and m.partition_ready(TP1)
    op = m.send_offsets({TP0: 10, TP1: (20, "meta")}, GROUP)
    add_offsets = take(m)
    assert (add_offsets.api_key, add_offsets.body["group_id"]) == (ApiKey.ADD_OFFSETS_TO_TXN,
                                                                   "g")
    m.on_response(code(), 1.1)
    assert take(m).body == {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
    m.on_response(found(3), 1.1)
    commit = take(m)
    assert (commit.api_key, commit.dest, commit.group, commit.max_version) == (
        ApiKey.TXN_OFFSET_COMMIT, "group", "g", 4)
    assert (commit.body["generation_id"], commit.body["member_id"]) == (7, "member-1")
    assert commit.body["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": -1,
         "committed_metadata": ""},
        {"partition_index": 1, "committed_offset": 20, "committed_leader_epoch": -1,
         "committed_metadata": "meta"}]}]
    m.on_response(offsets((TP0, ErrorCode.none), (TP1, ErrorCode.none)), 1.2)
    assert op.done and op.error is None
    end = m.commit()
    assert m.next_request(1.3, False) is None  # EndTxn waits for the batches
    request = take(m, 1.3)
    assert (request.api_key, request.max_version, request.body["committed"]) == (
        ApiKey.END_TXN, 4, True)
    m.on_response(code(), 1.4)
    assert end.done and end.error is None and m.state is TxnState.READY
    assert m.producer_epoch == 0 and not m.partitions


def test_tv2_adds_nothing_and_adopts_the_epoch_endtxn_bumps() -> None:
    m = ready(tv2=True)
    m.begin()
    m.add_partition(TP0)
    assert m.partition_ready(TP0) and m.next_request(0.0, True) is None
    op = m.send_offsets({TP1: 4}, GROUP)
    assert take(m).kind == "find"  # the group's coordinator; no AddOffsetsToTxn
    m.on_response(found(), 0.0)
    commit = take(m)
    assert (commit.api_key, commit.version) == (ApiKey.TXN_OFFSET_COMMIT, 5)
    m.on_response(offsets((TP1, ErrorCode.coordinator_load_in_progress)), 0.0)
    assert not op.done
    assert m.next_request(0.05, True) is None  # after the backoff
    assert take(m, 0.1).kind == "txn_offsets"
    m.on_response(offsets((TP1, ErrorCode.none)), 0.1)
    assert op.done and op.error is None
    end = m.commit()
    request = take(m)
    assert (request.api_key, request.version) == (ApiKey.END_TXN, 5)
    m.on_response(code(producer_id=5, producer_epoch=1), 0.0)
    assert end.done and (m.producer_id, m.producer_epoch) == (5, 1)
    m.begin()
    abort = m.abort()
    assert abort.done and m.next_request(0.0, True) is None  # nothing was in it


def test_fenced_at_end_is_fatal() -> None:
    m = ready(tv2=False)
    m.begin()
    m.add_partition(TP0)
    take(m)
    m.on_response(partitions((TP0, ErrorCode.none)), 0.0)
    op = m.commit()
    take(m)
    m.on_response(code(ErrorCode.producer_fenced), 0.0)
    assert m.state is TxnState.FATAL_ERROR
    assert isinstance(op.error, ProducerFencedError)
    with pytest.raises(ProducerFencedError):
        m.begin()
    with pytest.raises(ProducerFencedError):
        m.abort()


def test_a_rebalanced_group_makes_the_transaction_abortable() -> None:
    m = ready(tv2=True)
    m.begin()
    m.add_partition(TP0)
    op = m.send_offsets({TP0: 1}, GROUP)
    take(m)
    m.on_response(found(), 0.0)
    take(m)
    m.on_response(offsets((TP0, ErrorCode.illegal_generation)), 0.0)
    assert isinstance(op.error, CommitFailedError)
    assert m.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        m.commit()
    with pytest.raises(TransactionAbortableError):
        m.add_partition(TP1)
    abort = m.abort()
    request = take(m)
    assert (request.api_key, request.body["committed"]) == (ApiKey.END_TXN, False)
    m.on_response(code(producer_id=5, producer_epoch=1), 0.0)
    assert abort.done and abort.error is None and m.state is TxnState.READY
    m.begin()  # and the producer goes on


def test_tv1_abort_after_a_failed_batch_bumps_the_epoch() -> None:
    m = ready(tv2=False, epoch=4)
    m.begin()
    m.add_partition(TP0)
    take(m)
    m.on_response(partitions((TP0, ErrorCode.none)), 0.0)
    m.batch_failed(TP0, TimeoutError("expired"), sequenced=True)
    assert m.state is TxnState.ABORTABLE_ERROR
    abort = m.abort()
    assert take(m).body["committed"] is False
    m.on_response(code(), 0.0)
    bump = take(m)
    assert bump.api_key == ApiKey.INIT_PRODUCER_ID
    assert (bump.body["producer_id"], bump.body["producer_epoch"]) == (5, 4)
    assert not abort.done
    m.on_response(code(producer_id=5, producer_epoch=5), 0.0)
    assert abort.done and m.producer_epoch == 5 and m.state is TxnState.READY


def test_a_fenced_batch_is_fatal_and_an_abort_drops_unsent_additions() -> None:
    m = ready(tv2=False)
    m.begin()
    m.add_partition(TP0)
    take(m)  # AddPartitionsToTxn in flight
    abort = m.abort()
    m.on_response(partitions((TP0, ErrorCode.none)), 0.0)  # arrives after the abort
    assert m.next_request(0.0, True).kind == "end"  # type: ignore[union-attr]
    m.on_response(code(), 0.0)
    assert abort.done and m.state is TxnState.READY
    m.begin()
    m.batch_failed(TP0, error_for(ErrorCode.invalid_producer_epoch), sequenced=True)
    assert m.state is TxnState.FATAL_ERROR and isinstance(m.error, ProducerFencedError)


def test_tv1_commit_right_after_send_adds_the_partition_then_ends() -> None:
    """A commit called before AddPartitionsToTxn went out still ends the transaction
    (it once completed locally and left the batch's transaction open)."""
    m = ready(tv2=False)
    m.begin()
    m.add_partition(TP0)
    op = m.commit()
    assert not op.done
    assert take(m, done=False).api_key == ApiKey.ADD_PARTITIONS_TO_TXN
    m.on_response(partitions((TP0, ErrorCode.none)), 0.0)
    assert m.next_request(0.0, False) is None  # the batch is still on its way
    assert take(m).api_key == ApiKey.END_TXN
    m.on_response(code(), 0.0)
    assert op.done and op.error is None


@pytest.mark.parametrize("config", [{"acks": 1}, {"enable_idempotence": False}])
def test_a_transactional_producer_must_be_idempotent(config: dict[str, Any]) -> None:
    from samsa.client.producer import Producer

    with pytest.raises(ValueError, match="idempotent"):
        Producer(bootstrap_servers="127.0.0.1:9", transactional_id="t", **config)
