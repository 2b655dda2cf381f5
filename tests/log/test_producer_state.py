from __future__ import annotations

import pytest

from samsa.log import InvalidProducerEpoch, OutOfOrderSequence
from samsa.log.producer_state import (
    ProducerStateManager,
    check_batch_sequence,
    in_sequence,
    next_entry,
)
from samsa.protocol.batch import parse_header
from tests.log.conftest import OpenLog
from tests.log.helpers import batch, crash, values

PID = 42
INT32_MAX = 2**31 - 1


def produced(seq: int, n: int = 2, epoch: int = 0, pid: int = PID, ts: int = 1_000) -> bytes:
    return batch(
        *values(n), ts=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def test_in_sequence_wraps() -> None:
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(-1, 0)


def test_pure_rules() -> None:
    first = parse_header(produced(0, 3))
    assert check_batch_sequence(None, first) is None
    entry = next_entry(None, first)
    assert entry is not None and entry.last_seq == 2
    assert check_batch_sequence(entry, parse_header(produced(3))) is None
    with pytest.raises(OutOfOrderSequence):
        check_batch_sequence(entry, parse_header(produced(4)))
    dup = check_batch_sequence(entry, parse_header(produced(0, 3)))
    assert dup is not None and (dup.first_seq, dup.last_seq) == (0, 2)
    with pytest.raises(OutOfOrderSequence):  # same first seq, different length: not a dup
        check_batch_sequence(entry, parse_header(produced(0, 2)))
    with pytest.raises(InvalidProducerEpoch):
        check_batch_sequence(next_entry(None, parse_header(produced(0, epoch=5))), first)
    assert check_batch_sequence(entry, parse_header(produced(0, epoch=1))) is None
    with pytest.raises(OutOfOrderSequence):
        check_batch_sequence(entry, parse_header(produced(7, epoch=1)))


def test_unknown_producer_accepts_any_sequence() -> None:
    assert check_batch_sequence(None, parse_header(produced(1234))) is None


def test_manager_stages_until_commit() -> None:
    mgr = ProducerStateManager()
    dup, staged = mgr.check([parse_header(produced(0)), parse_header(produced(2))])
    assert dup is None and staged[PID].last_seq == 3
    assert mgr.get(PID) is None
    mgr.commit(staged)
    assert mgr.get(PID) == staged[PID]
    with pytest.raises(OutOfOrderSequence):
        mgr.check([parse_header(produced(4)), parse_header(produced(9))])
    assert mgr.get(PID) == staged[PID]


def test_log_dedups_retries_of_last_five(open_log: OpenLog) -> None:
    log = open_log()
    infos = [log.append(produced(2 * i), now_ms=0) for i in range(6)]
    assert [i.base_offset for i in infos] == [0, 2, 4, 6, 8, 10]
    end = log.log_end_offset
    for i in range(1, 6):
        again = log.append(produced(2 * i), now_ms=0)
        assert again.duplicate
        assert (again.base_offset, again.last_offset) == (2 * i, 2 * i + 1)
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequence) as exc:  # too old to be remembered
        log.append(produced(0), now_ms=0)
    assert exc.value.error_code == 45
    with pytest.raises(OutOfOrderSequence):
        log.append(produced(13), now_ms=0)
    assert log.log_end_offset == end


def test_log_epoch_rules(open_log: OpenLog) -> None:
    log = open_log()
    log.append(produced(0, epoch=3), now_ms=0)
    with pytest.raises(InvalidProducerEpoch) as exc:
        log.append(produced(2, epoch=2), now_ms=0)
    assert exc.value.error_code == 47
    with pytest.raises(OutOfOrderSequence):
        log.append(produced(2, epoch=4), now_ms=0)
    assert log.append(produced(0, epoch=4), now_ms=0).base_offset == 2
    # Another producer is independent; non-idempotent batches are never checked.
    assert log.append(produced(77, pid=7), now_ms=0).base_offset == 4
    assert log.append(batch(*values(1)), now_ms=0).base_offset == 6


def test_sequence_wraps_in_log(open_log: OpenLog) -> None:
    log = open_log()
    log.append(produced(INT32_MAX - 1, n=2), now_ms=0)
    assert log.append(produced(0, n=2), now_ms=0).base_offset == 2
    wrap = log.append(produced(2, n=3), now_ms=0)
    assert not wrap.duplicate


def test_duplicate_in_one_append_returns_original(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    first = log.append(produced(0), now_ms=500)
    again = log.append(produced(0), now_ms=900)
    assert again.duplicate
    assert (again.base_offset, again.log_append_time) == (0, first.log_append_time)


def test_dedup_survives_reopen_and_crash(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="400")
    for i in range(8):
        log.append(produced(2 * i), now_ms=0)
    log.close()
    log = open_log(segment_bytes="400")
    retry = log.append(produced(14), now_ms=0)
    assert retry.duplicate and retry.base_offset == 14
    with pytest.raises(OutOfOrderSequence):
        log.append(produced(17), now_ms=0)
    log.append(produced(16), now_ms=0)
    # Abandon without close (kill -9): the state comes back from batch headers.
    crash(log)
    log = open_log(segment_bytes="400")
    again = log.append(produced(16), now_ms=0)
    assert again.duplicate and again.base_offset == 16
    assert log.append(produced(18), now_ms=0).base_offset == 18


def test_log_start_offset_forgets_producers(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="400")
    log.append(produced(0, pid=1), now_ms=0)
    for i in range(8):
        log.append(produced(2 * i, pid=2), now_ms=0)
    log.delete_records(2)
    assert log.producers.get(1) is None
    assert log.producers.get(2) is not None
    # Unknown again: any sequence is accepted.
    assert not log.append(produced(55, pid=1), now_ms=0).duplicate
