"""The transaction coordinator's rules, on a fake clock (tests/transactions/harness.py)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from samsa.transactions import AddPartitions, EndTxn, InitProducerId, TxnState, TxnValue
from samsa.transactions.records import TxnKey, deserialize, serialize
from tests.transactions.harness import TxnHarness

E = ErrorCode
S = TxnState
T = "tx-a"


def init(h: TxnHarness, tid: str = T, timeout: int = 10_000, pid: int = -1,
         epoch: int = -1) -> tuple[int, int, int]:
    a = h.call(InitProducerId(tid, timeout, h.allocate(), pid, epoch))
    return a.error_code, a.producer_id, a.producer_epoch


def test_records_round_trip_in_kafkas_format() -> None:
    value = TxnValue(7, 3, 60_000, S.ONGOING, (("a", 0), ("a", 2), ("b", 1)), 10, 5)
    key, raw = serialize(TxnKey("x"), value)
    assert key == b"\x00\x00\x00\x01x"
    assert raw is not None and raw[:2] == b"\x00\x00"  # value version 0
    assert deserialize(key, raw) == (TxnKey("x"), value)
    assert deserialize(key, None) == (TxnKey("x"), None)


def test_new_id_then_epoch_bumps_fence_the_previous_instance() -> None:
    h = TxnHarness()
    code, pid, epoch = init(h)
    assert (code, epoch) == (E.none, 0)
    code, pid2, epoch2 = init(h)
    assert (code, pid2, epoch2) == (E.none, pid, 1)
    # the first instance is fenced everywhere
    assert h.call(AddPartitions(T, pid, 0, (("t", 0),))).error_code == E.producer_fenced
    assert h.call(EndTxn(T, pid, 0, True)).error_code == E.producer_fenced
    assert h.call(AddPartitions(T, pid + 99, 1, (("t", 0),))).error_code \
        == E.invalid_producer_id_mapping
    # KIP-360: a producer that names its id and epoch must hold them
    assert init(h, pid=pid, epoch=0)[0] == E.producer_fenced
    assert init(h, pid=pid, epoch=1)[1:] == (pid, 2)


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    assert h.call(AddPartitions(T, pid, epoch, (("t", 1), ("t", 0)))).error_code == E.none
    assert h.call(AddPartitions(T, pid, epoch, (("u", 0),))).error_code == E.none
    assert h.state(T).state is S.ONGOING  # type: ignore[union-attr]
    assert h.call(EndTxn(T, pid, epoch, True)).error_code == E.none
    assert h.stored(T).state is S.PREPARE_COMMIT  # type: ignore[union-attr]
    # markers in flight: a retry is CONCURRENT_TRANSACTIONS, a new add too
    assert h.call(EndTxn(T, pid, epoch, True)).error_code == E.concurrent_transactions
    assert h.call(EndTxn(T, pid, epoch, False)).error_code == E.invalid_txn_state
    assert h.call(AddPartitions(T, pid, epoch, (("t", 0),))).error_code \
        == E.concurrent_transactions
    (m,) = h.write_markers()
    assert (m.commit, m.producer_id, m.producer_epoch) == (True, pid, epoch)
    assert m.partitions == (("t", 0), ("t", 1), ("u", 0))
    done = h.stored(T)
    assert done is not None and (done.state, done.partitions) == (S.COMPLETE_COMMIT, ())
    assert h.call(EndTxn(T, pid, epoch, True)).error_code == E.none  # a retry
    assert h.call(EndTxn(T, pid, epoch, False)).error_code == E.invalid_txn_state


def test_end_without_a_transaction_is_invalid() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    assert h.call(EndTxn(T, pid, epoch, True)).error_code == E.invalid_txn_state
    assert h.call(EndTxn(T, pid, epoch, False)).error_code == E.invalid_txn_state


def test_timeouts_and_ids_are_checked() -> None:
    h = TxnHarness(max_timeout_ms=60_000)
    assert init(h, timeout=60_001)[0] == E.invalid_transaction_timeout
    assert init(h, timeout=0)[0] == E.invalid_transaction_timeout
    assert init(h, tid="")[0] == E.invalid_request
    assert h.call(EndTxn("nobody", 1, 0, True)).error_code == E.invalid_producer_id_mapping


def test_new_instance_aborts_the_open_transaction_under_a_new_epoch() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    h.call(AddPartitions(T, pid, epoch, (("t", 0),)))
    assert init(h)[0] == E.concurrent_transactions
    (m,) = h.write_markers()
    assert (m.commit, m.producer_epoch) == (False, epoch + 1)  # the marker fences the zombie
    assert init(h)[1:] == (pid, epoch + 2)
    assert h.call(EndTxn(T, pid, epoch, True)).error_code == E.producer_fenced


def test_abandoned_transaction_times_out_and_aborts() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h, timeout=5_000)
    h.call(AddPartitions(T, pid, epoch, (("t", 0),)))
    h.timer.advance(2_000)
    h.call(AddPartitions(T, pid, epoch, (("t", 1),)))  # more partitions: same deadline
    h.timer.advance(2_999)
    assert h.markers == []
    h.timer.advance(1)
    (m,) = h.markers
    assert (m.commit, m.producer_epoch, m.partitions) == (False, epoch + 1, (("t", 0), ("t", 1)))
    h.write_markers()
    assert h.stored(T).state is S.COMPLETE_ABORT  # type: ignore[union-attr]
    assert h.call(AddPartitions(T, pid, epoch, (("t", 0),))).error_code == E.producer_fenced


@pytest.mark.parametrize("commit", [True, False])
def test_a_reload_between_decision_and_markers_writes_them(commit: bool) -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    h.call(AddPartitions(T, pid, epoch, (("t", 0),)))
    h.call(EndTxn(T, pid, epoch, commit))
    h.load()  # the coordinator died before its markers: the new one writes them
    (m,) = h.markers
    assert (m.commit, m.producer_id, m.producer_epoch) == (commit, pid, epoch)
    h.write_markers()
    want = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    assert h.state(T).state is want  # type: ignore[union-attr]


def test_a_reload_rearms_the_timeout_of_an_open_transaction() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h, timeout=5_000)
    h.call(AddPartitions(T, pid, epoch, (("t", 0),)))
    h.load()
    assert h.markers == []
    h.timer.advance(5_000)
    (m,) = h.markers
    assert not m.commit


def test_unowned_and_loading_shards() -> None:
    h = TxnHarness()
    p = h.coord.partition_for(T)
    h.coord.unload(p)
    assert init(h)[0] == E.not_coordinator
    h.coord.begin_load(p)
    assert init(h)[0] == E.coordinator_load_in_progress


def test_tv2_every_end_bumps_the_epoch() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    h.call(AddPartitions(T, pid, epoch, (("t", 0),)))
    a = h.call(EndTxn(T, pid, epoch, True, bump=True))
    assert (a.error_code, a.producer_id, a.producer_epoch) == (E.none, pid, epoch + 1)
    (m,) = h.markers
    assert (m.commit, m.producer_epoch) == (True, epoch + 1)  # the marker fences epoch
    # the retry of an end whose answer was lost: CONCURRENT while the markers are in flight
    assert h.call(EndTxn(T, pid, epoch, True, bump=True)).error_code \
        == E.concurrent_transactions
    h.write_markers()
    retry = h.call(EndTxn(T, pid, epoch, True, bump=True))
    assert (retry.error_code, retry.producer_epoch) == (E.none, epoch + 1)
    assert h.call(EndTxn(T, pid, epoch, False, bump=True)).error_code == E.producer_fenced
    # the next transaction runs at the new epoch; the old one is fenced
    assert h.call(AddPartitions(T, pid, epoch, (("t", 0),))).error_code == E.producer_fenced
    assert h.call(AddPartitions(T, pid, epoch + 1, (("t", 0),))).error_code == E.none


def test_tv2_abort_without_a_transaction_bumps_the_epoch() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    a = h.call(EndTxn(T, pid, epoch, False, bump=True))
    assert (a.error_code, a.producer_epoch) == (E.none, epoch + 1)
    (m,) = h.write_markers()
    assert m.partitions == ()
    assert h.state(T).state is S.COMPLETE_ABORT  # type: ignore[union-attr]
    assert h.call(EndTxn(T, pid, epoch + 1, True, bump=True)).error_code == E.invalid_txn_state


def test_idle_ids_expire_and_open_ones_do_not() -> None:
    h = TxnHarness(id_expiration_ms=100_000)
    _, pid, _ = init(h)
    _, busy_pid, busy_epoch = init(h, tid="busy", timeout=60_000)
    h.timer.advance(50_000)
    h.call(AddPartitions("busy", busy_pid, busy_epoch, (("t", 0),)))  # open: no expiry
    h.load()  # a reload re-arms the expiry
    h.timer.advance(50_000)
    assert h.state(T) is None and h.stored(T) is None  # a tombstone
    busy = h.state("busy")
    assert busy is not None and busy.state is S.ONGOING  # open: not expired
    code, new_pid, new_epoch = init(h)
    assert (code, new_epoch) == (E.none, 0) and new_pid != pid


def test_markers_carry_the_lease_epoch_the_shard_was_loaded_under() -> None:
    h = TxnHarness()
    _, pid, epoch = init(h)
    h.call(AddPartitions(T, pid, epoch, (("t", 0),)))
    h.call(EndTxn(T, pid, epoch, True))
    (m,) = h.markers
    assert m.coordinator_epoch == 0  # a single node
    h.load(lease_epoch=7)  # another cluster node took the shard before the markers
    (m,) = h.markers
    assert m.commit and m.coordinator_epoch == 7


def verify(h: TxnHarness, pid: int, epoch: int, *partitions: tuple[str, int]
           ) -> tuple[int, tuple[tuple[str, int], ...]]:
    a = h.call(AddPartitions(T, pid, epoch, partitions, verify_only=True))
    return a.error_code, a.unverified


def test_verification_lists_partitions_not_in_the_open_transaction() -> None:
    """KIP-890 part 1: a leader's verify-only question writes nothing and names the
    partitions outside the producer's open transaction; a transaction that ended (the
    late produce of a hanging transaction) has none."""
    h = TxnHarness()
    _, pid, epoch = init(h)
    assert verify(h, pid, epoch, ("t", 0)) == (E.none, (("t", 0),))  # Empty
    assert h.call(AddPartitions(T, pid, epoch, (("t", 0),))).error_code == E.none
    written = len(h.log.get(h.coord.partition_for(T), []))
    assert verify(h, pid, epoch, ("t", 0), ("t", 1)) == (E.none, (("t", 1),))
    assert len(h.log[h.coord.partition_for(T)]) == written  # nothing written
    assert h.state(T).partitions == (("t", 0),)  # type: ignore[union-attr]
    assert verify(h, pid, epoch + 1, ("t", 0))[0] == E.producer_fenced
    assert verify(h, pid + 1, epoch, ("t", 0))[0] == E.invalid_producer_id_mapping
    assert h.call(EndTxn(T, pid, epoch, False)).error_code == E.none
    assert verify(h, pid, epoch, ("t", 0))[0] == E.concurrent_transactions  # markers due
    h.write_markers()
    assert verify(h, pid, epoch, ("t", 0)) == (E.none, (("t", 0),))  # CompleteAbort
