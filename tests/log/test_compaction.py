from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kio.records.readers import read_batch

from samsa.log import PartitionLog
from samsa.log.records import read_records
from tests.log.conftest import OpenLog
from tests.log.helpers import all_batches, batch, headers_of

COMPACT = {
    "cleanup_policy": "compact",
    "segment_bytes": "400",
    "index_interval_bytes": "100",
    "min_cleanable_dirty_ratio": "0.01",
}


def records_of(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, decoded by kio (an independent reader)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for h in all_batches(log):
        data = log.read(h.base_offset, 1)[: h.size]
        decoded, _ = read_batch(data, 0)
        out.extend((r.offset, r.key, r.value) for r in decoded.records)
    return out


def keyed(i: int, nkeys: int = 5) -> tuple[bytes, bytes]:
    return b"k%d" % (i % nkeys), b"v%d" % i


def fill_keyed(log: PartitionLog, n_batches: int, per_batch: int = 3, ts: int = 1_000) -> None:
    for b in range(n_batches):
        recs = [keyed(b * per_batch + j) for j in range(per_batch)]
        log.append(batch(*recs, ts=ts), now_ms=ts)


def test_keeps_latest_per_key_with_offsets_preserved(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 20)
    log.flush()
    before = records_of(log)
    assert len(before) == 60
    active_base = log.segments[-1].base_offset
    n_segments = len(log.segments)
    stats = log.compact(now_ms=10_000)
    assert stats.segments_cleaned == n_segments - 1
    assert len(log.segments) < n_segments  # emptied segments are removed
    assert stats.bytes_after < stats.bytes_before
    after = records_of(log)
    # Every surviving record is an original record at its original offset.
    assert set(after) <= set(before)
    cleaned = [r for r in after if r[0] < active_base]
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys))  # one record per key in the cleaned part
    latest = {k: o for o, k, _ in before if o < active_base}
    assert {k: o for o, k, _ in cleaned} == latest
    # The active segment is untouched, and the log end does not move.
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert log.log_end_offset == 60
    # Offsets strictly increase (holes allowed), and reads from any offset still work.
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    for o in range(60):
        first = headers_of(log.read(o, 1))[0]
        assert first.last_offset >= o


def test_compacted_log_reopens(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 20)
    log.flush()
    log.compact(now_ms=10_000)
    expected = records_of(log)
    log.close()
    log = open_log(**COMPACT)
    assert records_of(log) == expected
    assert log.log_end_offset == 60
    assert log.append(batch((b"k0", b"new")), now_ms=1).base_offset == 60


def test_second_pass_needs_dirty_data(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACT, "min_cleanable_dirty_ratio": "0.5"})
    fill_keyed(log, 20)
    log.flush()
    assert log.compact(now_ms=10_000).segments_cleaned > 0
    assert log.compact(now_ms=10_000).segments_cleaned == 0


def test_unflushed_and_recent_segments_are_not_cleaned(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACT, "min_compaction_lag_ms": "5000"})
    fill_keyed(log, 20)
    assert log.compact(now_ms=100_000).segments_cleaned == 0  # nothing fsynced yet
    log.flush()
    assert log.compact(now_ms=5_999).segments_cleaned == 0  # ts 1000 + lag 5000 > 5999
    assert log.compact(now_ms=6_000).segments_cleaned > 0


def test_tombstones_expire_after_delete_retention(open_log: OpenLog) -> None:
    cfg = {**COMPACT, "delete_retention_ms": "1000"}
    log = open_log(**cfg)
    log.append(batch((b"a", b"1"), (b"b", b"1"), ts=1_000), now_ms=0)
    log.append(batch((b"a", None), (b"c", b"1"), ts=2_000), now_ms=0)  # tombstone for a
    for i in range(12):
        log.append(batch((b"x%d" % i, b"y"), ts=2_000), now_ms=0)
    log.flush()
    log.compact(now_ms=2_500)
    recs = {(k, v) for _, k, v in records_of(log)}
    assert (b"a", None) in recs and (b"a", b"1") not in recs
    assert (b"b", b"1") in recs and (b"c", b"1") in recs
    assert log.compact(now_ms=3_001).segments_cleaned == 0  # nothing new: not dirty
    for i in range(6):
        log.append(batch((b"z%d" % i, b"1"), ts=2_000), now_ms=0)  # rolls a new segment
    log.flush()
    # The tombstone at 2000 is now older than delete.retention.ms.
    assert log.compact(now_ms=3_001).segments_cleaned > 0
    keys = [k for _, k, _ in records_of(log)]
    assert b"a" not in keys
    assert b"b" in keys and b"c" in keys


def test_null_keys_are_kept(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    for _ in range(10):
        log.append(batch((None, b"n"), (b"k", b"v"), ts=1_000), now_ms=0)
    log.flush()
    log.compact(now_ms=10_000)
    recs = records_of(log)
    active = log.segments[-1].base_offset
    assert sum(1 for o, k, _ in recs if k is None and o < active) == sum(
        1 for h in range(10) if 2 * h < active
    )


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_kept_or_dropped_whole(open_log: OpenLog, codec: int) -> None:
    log = open_log(**COMPACT)
    log.append(batch((b"a", b"1"), (b"b", b"1"), compression=codec), now_ms=0)  # all stale
    log.append(batch((b"a", b"2"), (b"c", b"1"), compression=codec), now_ms=0)  # c latest
    log.append(batch((b"a", b"3"), (b"b", b"2"), ts=1_000), now_ms=0)
    for i in range(10):
        log.append(batch((b"x%d" % i, b"y" * 40)), now_ms=0)
    log.flush()
    assert len(log.segments) > 1
    log.compact(now_ms=10_000)
    bases = [h.base_offset for h in all_batches(log)]
    assert 0 not in bases  # nothing in the first batch was the latest
    assert 2 in bases  # kept whole because of c, including the stale a=2
    kept = next(h for h in all_batches(log) if h.base_offset == 2)
    assert kept.compression == codec and kept.record_count == 2
    data = log.read(2, 1)[: kept.size]
    _, recs = read_records(bytes(data), kept)
    assert [r.key for r in recs] == [b"a", b"c"]


def test_delete_policy_does_not_compact(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="400")
    fill_keyed(log, 20)
    log.flush()
    assert log.compact(now_ms=10_000).segments_cleaned == 0


def test_interrupted_cleaning_leaves_original(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 20)
    log.close()
    d = tmp_path / "p0"
    (d / "00000000000000000000.log.cleaned").write_bytes(b"\x00" * 50)
    log = open_log(**COMPACT)
    assert len(records_of(log)) == 60


def test_clean_on_a_worker_thread_while_appending_and_reading(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 20)
    log.flush()
    before = records_of(log)
    active_base = log.segments[-1].base_offset
    plan = log.plan_compaction(now_ms=10_000)
    assert plan is not None
    assert log.plan_compaction(now_ms=10_000) is None  # one compaction at a time
    result: list[list[int] | None] = []
    worker = threading.Thread(target=lambda: result.append(log.clean(plan)))
    worker.start()
    # The loop thread keeps serving meanwhile: appends and reads of the planned segments.
    fill_keyed(log, 5, ts=2_000)
    assert records_of(log)[: len(before)] == before  # nothing swapped in yet
    worker.join()
    stats = log.install_cleaned(plan, result[0])
    assert stats.segments_cleaned == len(plan.segments)
    after = records_of(log)
    cleaned = [r for r in after if r[0] < active_base]
    assert {k: o for o, k, _ in cleaned} == {k: o for o, k, _ in before if o < active_base}
    assert [r for r in after if r[0] >= active_base] == [
        r for r in before if r[0] >= active_base
    ] + [r for r in after if r[0] >= 60]
    assert len([r for r in after if r[0] >= 60]) == 15  # the appends made meanwhile
    assert not list(log.directory.glob("*.cleaned"))


def test_close_stops_a_running_clean_and_leaves_no_cleaned_files(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 40)
    log.flush()
    directory = log.directory
    plan = log.plan_compaction(now_ms=10_000)
    assert plan is not None
    log.close()  # e.g. the topic is deleted before the worker got to run
    assert log.clean(plan) is None
    assert log.install_cleaned(plan, None).segments_cleaned == 0
    assert not list(directory.glob("*.cleaned"))


def test_segments_removed_by_retention_during_clean_are_skipped(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 20)
    log.flush()
    plan = log.plan_compaction(now_ms=10_000)
    assert plan is not None
    sizes = log.clean(plan)
    assert sizes is not None
    first = plan.segments[0]
    log.delete_records(log.segments[1].base_offset)  # drops the first segment meanwhile
    assert first not in log.segments
    stats = log.install_cleaned(plan, sizes)
    assert stats.segments_cleaned == len(plan.segments)
    assert not list(log.directory.glob("*.cleaned"))
    assert all(o >= log.log_start_offset for o, _, _ in records_of(log))


def test_a_plan_made_before_a_truncation_is_not_installed(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill_keyed(log, 20)
    log.flush()
    plan = log.plan_compaction(now_ms=10_000)
    assert plan is not None and len(plan.segments) > 2
    sizes = log.clean(plan)
    cut = plan.segments[2].base_offset + 1  # into a planned segment, which becomes active
    log.truncate_to(cut)
    before = records_of(log)
    assert log.install_cleaned(plan, sizes).segments_cleaned == 0
    assert records_of(log) == before
    assert log.log_end_offset <= cut and before[-1][0] == log.log_end_offset - 1
    assert not list(log.directory.glob("*.cleaned"))
