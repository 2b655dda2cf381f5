"""One share partition by hand: acquisition, acknowledgement, locks, limits, resets."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from samsa.share import (
    AckType,
    Acquired,
    LockKey,
    OffsetReset,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareUpdate,
    StateBatch,
)
from tests.share.simulation import SimTimer

A = RecordState.AVAILABLE
ACC, REL, REJ, REN = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW


def _part(limit: int = 3, locks: int = 100) -> tuple[SharePartition, SimTimer]:
    timer = SimTimer()
    return SharePartition("p", 10, timer, SharePartitionConfig(1_000, limit, locks)), timer


def test_acquire_locks_fresh_offsets_and_accept_moves_the_start() -> None:
    part, timer = _part()
    assert part.acquire("a", 15, 3, 0) == (Acquired(10, 12, 1),)
    assert part.acquire("b", 15, 10, 0) == (Acquired(13, 14, 1),)
    assert timer.deadlines == {LockKey("p", 1): 1_000, LockKey("p", 2): 1_000}
    assert part.acknowledge("a", [(10, 11, [ACC])], 5) == (ErrorCode.none, ShareUpdate(12))
    assert (part.start_offset, part.end_offset) == (12, 15)


def test_only_the_holder_may_acknowledge_and_nothing_is_applied_on_error() -> None:
    part, _ = _part()
    part.acquire("a", 12, 5, 0)
    assert part.acknowledge("b", [(10, 10, [ACC])], 0) == (ErrorCode.invalid_record_state, None)
    assert part.acknowledge("a", [(10, 10, [ACC]), (12, 12, [ACC])], 0)[0] == \
        ErrorCode.invalid_record_state
    assert part.start_offset == 10 and part.held_by("a") == [10, 11]
    assert part.acknowledge("a", [(10, 11, [ACC, ACC, ACC])], 0)[0] == ErrorCode.invalid_request


def test_release_redelivers_with_a_higher_count_until_the_limit_archives() -> None:
    part, _ = _part(limit=2)
    part.acquire("a", 11, 5, 0)
    assert part.acknowledge("a", [(10, 10, [REL])], 0) == (
        ErrorCode.none, ShareUpdate(10, (StateBatch(10, 10, A, 1),)))
    assert part.acquire("b", 11, 5, 0) == (Acquired(10, 10, 2),)
    # released at the limit: archived, and the start offset moves over it
    assert part.acknowledge("b", [(10, 10, [REL])], 0) == (ErrorCode.none, ShareUpdate(11))
    assert part.acquire("a", 11, 5, 0) == ()


def test_reject_archives_and_per_offset_types_apply() -> None:
    part, _ = _part()
    part.acquire("a", 14, 5, 0)
    error, update = part.acknowledge("a", [(10, 13, [REJ, ACC, REL, AckType.GAP])], 0)
    assert error == ErrorCode.none
    assert update == ShareUpdate(12, (StateBatch(12, 12, A, 1),
                                      StateBatch(13, 13, RecordState.ARCHIVED, 1)))
    assert part.next_fetch_offset() == 12


def test_lock_expiry_releases_early_fire_rearms_stale_fire_is_ignored() -> None:
    part, timer = _part()
    part.acquire("a", 12, 5, 0)
    key = LockKey("p", 1)
    timer.deadlines.clear()
    assert part.fire(key, 999) is None and timer.deadlines == {key: 1_000}  # early
    assert part.fire(key, 1_020) == ShareUpdate(10, (StateBatch(10, 11, A, 1),))  # late
    assert part.fire(key, 1_030) is None  # duplicate
    assert part.acquire("b", 12, 5, 1_030) == (Acquired(10, 11, 2),)


def test_renew_extends_the_lock() -> None:
    part, timer = _part()
    part.acquire("a", 12, 5, 0)
    assert part.acknowledge("a", [(10, 10, [REN])], 600) == (ErrorCode.none, None)
    assert timer.deadlines == {LockKey("p", 1): 1_000, LockKey("p", 2): 1_600}
    part.fire(LockKey("p", 1), 1_000)
    assert part.held_by("a") == [10]
    assert part.acquire("b", 12, 5, 1_000) == (Acquired(11, 11, 2),)


def test_member_leaving_releases_its_offsets() -> None:
    part, timer = _part()
    part.acquire("a", 12, 5, 0)
    part.acquire("b", 14, 5, 0)
    assert part.release_member("a") == ShareUpdate(10, (StateBatch(10, 11, A, 1),))
    assert list(timer.deadlines) == [LockKey("p", 2)]
    assert part.release_member("a") is None


def test_max_record_locks_bounds_the_window() -> None:
    part, _ = _part(locks=4)
    assert part.acquire("a", 100, 10, 0) == (Acquired(10, 13, 1),)
    assert part.acquire("b", 100, 10, 0) == ()
    part.acknowledge("a", [(10, 11, [ACC])], 0)
    assert part.acquire("b", 100, 10, 0) == (Acquired(14, 15, 1),)


def test_batch_optimized_acquisition_ends_with_a_log_batch_past_the_window() -> None:
    # log batches [10, 16), [16, 30), [30, 40); a window of 8 cuts the second one
    part, _ = _part(locks=8)
    ends = [16, 30, 40]
    assert part.acquire("a", 40, 100, 0, ends) == (Acquired(10, 29, 1),)
    assert part.acquire("b", 40, 100, 0, ends) == ()  # the window is full (20 > 8)
    part.acknowledge("a", [(10, 25, [ACC])], 0)
    # room for 4 more: the whole batch [30, 40) (a budget of 2 rounds up the same way)
    assert part.acquire("b", 40, 2, 0, ends) == (Acquired(30, 39, 1),)
    # the fetch read up to 25 only: never past what was read
    part2, _ = _part(locks=8)
    assert part2.acquire("a", 25, 100, 0, ends) == (Acquired(10, 24, 1),)
    # without batch ends (record-limit mode) the window bounds it exactly
    part3, _ = _part(locks=8)
    assert part3.acquire("a", 40, 100, 0) == (Acquired(10, 17, 1),)


@pytest.mark.parametrize(("value", "expected"), [
    ("latest", OffsetReset("latest")),
    ("EARLIEST", OffsetReset("earliest")),
    ("by_duration:PT1H30M", OffsetReset("by_duration", 5_400_000)),
    ("by_duration:P1DT0.5S", OffsetReset("by_duration", 86_400_500)),
])
def test_offset_reset_parses(value: str, expected: OffsetReset) -> None:
    assert OffsetReset.parse(value) == expected


@pytest.mark.parametrize("value", ["none", "by_duration:", "by_duration:PT", "by_duration:1h"])
def test_offset_reset_rejects(value: str) -> None:
    with pytest.raises(ValueError, match=r"share\.auto\.offset\.reset"):
        OffsetReset.parse(value)


def test_offset_reset_start_offsets() -> None:
    def by_time(ts: int) -> int | None:
        return 7 if ts <= 1_000 else None

    assert OffsetReset("latest").start_offset(3, 9, 5_000, by_time) == 9
    assert OffsetReset("earliest").start_offset(3, 9, 5_000, by_time) == 3
    assert OffsetReset("by_duration", 4_000).start_offset(3, 9, 5_000, by_time) == 7
    assert OffsetReset("by_duration", 10).start_offset(3, 9, 5_000, by_time) == 9


def test_skip_to_follows_the_log_start() -> None:
    part, timer = _part()
    part.acquire("a", 14, 2, 0)  # 10-11 held by a
    part.acquire("b", 14, 5, 0)  # 12-13 held by b
    part.acknowledge("b", [(12, 12, [REL])], 0)
    assert part.skip_to(12) == ShareUpdate(12)
    assert part.held_by("a") == [] and LockKey("p", 1) not in timer.deadlines
    assert part.acknowledge("a", [(10, 10, [ACC])], 0)[0] == ErrorCode.invalid_record_state
    assert part.next_fetch_offset() == 12
    assert part.skip_to(20) == ShareUpdate(20)
    assert (part.start_offset, part.end_offset, part.runs) == (20, 20, {})
    assert part.skip_to(5) is None


def test_rejected_and_limit_archived_records_are_dead_letters() -> None:
    part, _ = _part(limit=2)
    part.acquire("a", 14, 4, 0)
    part.acknowledge("a", [(10, 13, [REJ, AckType.GAP, REL, ACC])], 0)
    assert part.take_dead() == [(10, 1)]  # a GAP has no record to copy
    part.acquire("a", 14, 4, 0)
    part.release_member("a")  # offset 12 at its second delivery: archived
    assert part.take_dead() == [(12, 2)] and part.take_dead() == []


def test_archive_skips_aborted_records_in_and_past_the_window() -> None:
    """read_committed: aborted records are archived, never acquired; past SPEO the window
    grows over them (what lies before them comes in AVAILABLE), within its room."""
    part, _ = _part(locks=10)
    part.acquire("a", 12, 5, 0)  # 10, 11 acquired
    part.acknowledge("a", [(11, 11, [REL])], 0)  # 11 available again
    ar = RecordState.ARCHIVED
    # 10 is held (left alone), 11 available (archived), 14-15 past SPEO (archived)
    assert part.archive([(10, 11), (14, 15)]) == ShareUpdate(10, (
        StateBatch(11, 11, ar, 1), StateBatch(14, 15, ar, 0)))
    assert part.end_offset == 16 and part.available() == {12, 13}
    assert part.acquire("b", 20, 10, 0) == (Acquired(12, 13, 1), Acquired(16, 19, 1))
    assert not part.dead  # no dead letters
    part.acknowledge("a", [(10, 10, [ACC])], 0)
    part.acknowledge("b", [(12, 13, [ACC]), (16, 19, [ACC])], 0)
    assert part.start_offset == 20
    # no room past SPSO + max record locks (30): nothing archived there, nothing changed
    assert part.archive([(31, 40)]) is None and part.end_offset == 20
    assert part.archive([(25, 40)]) == ShareUpdate(20, (StateBatch(25, 29, ar, 0),))
    assert part.end_offset == 30 and part.available() == {20, 21, 22, 23, 24}


def test_one_run_per_acquisition_split_only_by_partial_acknowledgement() -> None:
    """Fresh records are acquired as one run (Kafka's in-flight batch); acknowledging part
    of it splits it, and the lock's expiry releases every piece it still holds."""
    part, timer = _part()
    assert part.acquire("a", 30, 20, 0) == (Acquired(10, 29, 1),)
    assert list(part.runs) == [10]
    assert part.acknowledge("a", [(12, 14, [ACC, REL, REJ])], 0) == (ErrorCode.none, ShareUpdate(
        10, (StateBatch(12, 12, RecordState.ACKNOWLEDGED, 1), StateBatch(13, 13, A, 1),
             StateBatch(14, 14, RecordState.ARCHIVED, 1))))
    assert list(part.runs) == [10, 12, 13, 14, 15]
    assert part.take_dead() == [(14, 1)]
    assert part.held_by("a") == [10, 11, *range(15, 30)]
    assert part.fire(LockKey("p", 1), 1_000) == ShareUpdate(10, (
        StateBatch(10, 11, A, 1), StateBatch(15, 29, A, 1)))
    assert not part.locks and part.available() == {10, 11, 13, *range(15, 30)}
    # the released pieces are acquired again as they are: runs, not offsets
    assert part.acquire("b", 30, 100, 1_000) == (Acquired(10, 11, 2), Acquired(13, 13, 2),
                                                 Acquired(15, 29, 2))
    assert len(part.runs) == 5 and timer.deadlines[LockKey("p", 2)] == 2_000
