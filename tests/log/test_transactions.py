"""Transactions in a partition's producer state: the last stable offset, the aborted
transactions, markers moving a producer's epoch, and all of it rebuilt when the log opens."""

from __future__ import annotations

import pytest

from samsa.log import InvalidProducerEpoch
from samsa.log.producer_state import AbortedTxn
from samsa.protocol.batch import parse_header
from samsa.protocol.records import control_type, encode_marker
from tests.log.conftest import OpenLog
from tests.log.helpers import batch, crash, values

TRANSACTIONAL = 0x10


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return batch(*values(n), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 attributes=TRANSACTIONAL)


def test_marker_encoding_is_read_back() -> None:
    commit = encode_marker(True, 7, 3, 0, 1_000)
    abort = encode_marker(False, 7, 3, 0, 1_000)
    for data, kind in ((commit, 1), (abort, 0)):
        h = parse_header(data)
        assert h.is_control and h.is_transactional and h.producer_id == 7
        assert h.producer_epoch == 3 and h.record_count == 1
        assert control_type(data, h) == kind
    assert control_type(txn_batch(1, 0), parse_header(txn_batch(1, 0))) is None


def test_lso_and_aborted_transactions(open_log: OpenLog) -> None:
    log = open_log()
    log.append(batch(*values(2)), now_ms=0)                      # 0-1 plain
    log.append(txn_batch(1, 0), now_ms=0)                        # 2-3 pid 1
    log.append(txn_batch(2, 0), now_ms=0)                        # 4-5 pid 2
    log.append(txn_batch(1, 2), now_ms=0)                        # 6-7 pid 1
    assert log.producers.last_stable_offset(log.log_end_offset) == 2
    log.append(encode_marker(False, 1, 0, 0, 0), now_ms=0)       # 8 abort pid 1
    assert log.producers.last_stable_offset(log.log_end_offset) == 4
    log.append(encode_marker(True, 2, 0, 0, 0), now_ms=0)        # 9 commit pid 2
    assert log.producers.last_stable_offset(log.log_end_offset) == 10
    assert log.producers.aborted == [AbortedTxn(1, 2, 8)]
    assert log.producers.aborted_between(0, 3) == [AbortedTxn(1, 2, 8)]
    assert log.producers.aborted_between(9, 10) == []
    # an empty abort (no data from the producer) records nothing
    log.append(encode_marker(False, 3, 0, 0, 0), now_ms=0)
    assert log.producers.aborted == [AbortedTxn(1, 2, 8)]


@pytest.mark.parametrize("how", ["close", "crash"])
def test_transactions_rebuilt_on_open(open_log: OpenLog, how: str) -> None:
    log = open_log(segment_bytes="400")
    log.append(txn_batch(1, 0), now_ms=0)                        # 0-1
    log.append(encode_marker(False, 1, 0, 0, 0), now_ms=0)       # 2
    for _ in range(4):
        log.append(batch(*values(3)), now_ms=0)                  # 3-14
    log.append(txn_batch(2, 0), now_ms=0)                        # 15-16, left open
    if how == "crash":
        crash(log)
    else:
        log.close()
    log = open_log(segment_bytes="400")
    assert len(log.segments) > 1
    assert log.producers.aborted == [AbortedTxn(1, 0, 2)]
    assert log.producers.last_stable_offset(log.log_end_offset) == 15
    log.append(encode_marker(True, 2, 0, 0, 0), now_ms=0)
    assert log.producers.last_stable_offset(log.log_end_offset) == log.log_end_offset


def test_marker_at_a_newer_epoch_fences_the_old_one(open_log: OpenLog) -> None:
    log = open_log()
    log.append(txn_batch(1, 0, epoch=4), now_ms=0)
    # the coordinator aborted the transaction under epoch 5 (a timeout or a new instance)
    log.append(encode_marker(False, 1, 5, 0, 0), now_ms=0)
    with pytest.raises(InvalidProducerEpoch):
        log.append(txn_batch(1, 2, epoch=4), now_ms=0)
    assert log.append(txn_batch(1, 0, epoch=5), now_ms=0).base_offset == 3


def test_compaction_judges_transactions_only_once_decided(open_log: OpenLog) -> None:
    """An open transaction's write is past the last stable offset: not cleaned, and it
    shadows nothing; once aborted, it is dropped and shadows nothing either."""
    from tests.log.test_compaction import COMPACT, records_of

    log = open_log(**COMPACT)
    log.append(batch((b"k", b"committed")), now_ms=0)                      # 0
    log.append(batch((b"k", b"aborted"), producer_id=1, producer_epoch=0,  # 1, open
                     base_sequence=0, attributes=TRANSACTIONAL), now_ms=0)
    for i in range(12):  # later segments: other keys
        log.append(batch((b"x%d" % i, b"v")), now_ms=0)
    log.flush()
    before = records_of(log)
    log.compact(now_ms=10_000)
    assert records_of(log) == before  # nothing below the open transaction to clean
    log.append(encode_marker(False, 1, 0, 0, 0), now_ms=0)
    for i in range(12):
        log.append(batch((b"x%d" % i, b"w")), now_ms=0)
    log.flush()
    log.compact(now_ms=10_000)
    kept = records_of(log)
    assert (0, b"k", b"committed") in kept  # not shadowed by the aborted write
    assert all(v != b"aborted" for _, _, v in kept)


def test_verification_guards(open_log: OpenLog) -> None:
    """KIP-890's guard: a batch verified before a marker for its producer (the transaction
    ended while the coordinator was asked) is no longer verified after it; one verified
    while its transaction opened (another batch was first) still is."""
    log = open_log()
    p = log.producers
    first, second = p.start_verification(1), p.start_verification(1)
    assert p.verified(1, 0, first) and p.verified(1, 0, second)
    log.append(txn_batch(1, 0), now_ms=0)  # the first opens the transaction
    assert p.in_transaction(1, 0) and not p.in_transaction(1, 1)
    assert p.verified(1, 0, second)  # its transaction is open here
    late = p.start_verification(1)
    log.append(encode_marker(False, 1, 0, 0, 0), now_ms=0)
    assert not p.in_transaction(1, 0)
    assert not p.verified(1, 0, late) and not p.verified(1, 0, second)
    kept, dropped = p.start_verification(2), p.start_verification(2)
    p.end_verification(2, dropped)
    assert p.verified(2, 0, kept) and not p.verified(2, 0, dropped)
    p.end_verification(2, kept)
    assert p.verifying == {}
