from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.log import (
    InvalidRecords,
    MessageTooLarge,
    OffsetOutOfRange,
    PartitionLog,
    RecordBatchTooLarge,
)
from samsa.log.index import OffsetIndex, TimeIndex
from samsa.protocol.batch import split_batches
from tests.log.conftest import OpenLog
from tests.log.helpers import all_batches, batch, fill, headers_of, values

SMALL = {"segment_bytes": "400", "index_interval_bytes": "100"}


def test_empty_log(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.flushed_offset) == (0, 0, 0)
    assert log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 100)


def test_append_assigns_consecutive_offsets(open_log: OpenLog) -> None:
    log = open_log()
    info = log.append(batch(*values(3)), now_ms=5)
    assert (info.base_offset, info.last_offset, info.log_append_time) == (0, 2, -1)
    two = batch(*values(2)) + batch(*values(4))
    info = log.append(two, now_ms=6)
    assert (info.base_offset, info.last_offset, info.log_start_offset) == (3, 8, 0)
    assert log.log_end_offset == 9
    headers = headers_of(log.read(0, 1 << 20))
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 4), (5, 8)]


def test_stored_bytes_equal_wire_bytes_except_base_offset(open_log: OpenLog) -> None:
    log = open_log()
    log.append(batch(*values(2)), now_ms=1)
    wire = batch(*values(5, prefix=b"x"))
    log.append(wire, now_ms=1)
    stored = log.read(2, 1 << 20)
    assert stored[8:] == wire[8:]
    assert split_batches(stored)[0].base_offset == 2


def test_rolls_and_reads_across_segments(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    fill(log, 20)
    assert log.log_end_offset == 60
    assert len(log.segments) > 3
    assert all(s.size <= 400 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    got = [h.base_offset for h in all_batches(log)]
    assert got == list(range(0, 60, 3))


def test_read_mid_batch_returns_containing_batch(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    fill(log, 20)
    for offset in range(60):
        first = headers_of(log.read(offset, 1))[0]
        assert first.base_offset <= offset <= first.last_offset


def test_at_least_one_batch_and_max_bytes(open_log: OpenLog) -> None:
    log = open_log()
    log.append(batch((b"k", b"x" * 500)), now_ms=1)
    for _ in range(5):
        log.append(batch((b"k", b"y")), now_ms=1)
    big = headers_of(log.read(0, 10))
    assert len(big) == 1 and big[0].size > 500
    small_size = headers_of(log.read(1, 1))[0].size
    assert len(headers_of(log.read(1, 3 * small_size))) == 3
    assert len(headers_of(log.read(1, 3 * small_size + small_size - 1))) == 3
    assert len(headers_of(log.read(1, 1 << 20))) == 5


def test_offset_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 2)
    assert log.read(6, 100) == b""
    with pytest.raises(OffsetOutOfRange) as exc:
        log.read(7, 100)
    assert exc.value.error_code == 1
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_invalid_input_writes_nothing(open_log: OpenLog) -> None:
    log = open_log()
    good = batch(*values(2))
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(InvalidRecords) as exc:
        log.append(good + bytes(bad), now_ms=1)
    assert exc.value.error_code == 2
    assert log.log_end_offset == 0
    assert log.segments[-1].size == 0


def test_max_message_bytes(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes="200")
    with pytest.raises(MessageTooLarge) as exc:
        log.append(batch((b"k", b"v" * 300)), now_ms=1)
    assert exc.value.error_code == 10
    assert log.log_end_offset == 0
    log.append(batch((b"k", b"v" * 50)), now_ms=1)
    assert log.log_end_offset == 1


def test_batch_larger_than_segment(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="100")
    with pytest.raises(RecordBatchTooLarge) as exc:
        log.append(batch((b"k", b"v" * 100)), now_ms=1)
    assert exc.value.error_code == 18


def test_log_append_time(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    info = log.append(batch(*values(2), ts=5), now_ms=777)
    assert info.log_append_time == 777
    (h,) = split_batches(log.read(0, 1000))  # CRC still valid
    assert (h.timestamp_type, h.max_timestamp, h.base_timestamp) == (1, 777, 5)


def test_segment_ms_roll_uses_batch_timestamps(open_log: OpenLog) -> None:
    log = open_log(segment_ms="1000")
    log.append(batch((b"k", b"v"), ts=10_000), now_ms=10_000)
    log.append(batch((b"k", b"v"), ts=10_900), now_ms=99_999)
    assert len(log.segments) == 1
    log.append(batch((b"k", b"v"), ts=11_001), now_ms=11_001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_index_lookups_use_sparse_entries(open_log: OpenLog) -> None:
    log = open_log(index_interval_bytes="100", segment_bytes="100000")
    fill(log, 50)
    seg = log.segments[-1]
    assert seg.offset_index is not None
    entries = len(seg.offset_index)
    assert 10 <= entries < 50
    rel, pos = seg.offset_index.floor(100)
    h = split_batches(log.read(rel, 1))[0]
    assert h.base_offset == rel
    assert seg.pread(8, pos) == log.read(rel, 1)[:8]


def test_indexes_rebuilt_when_deleted_or_corrupt(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 20)
    log.close()
    seg_dir = tmp_path / "p0"
    before = {p.name: p.read_bytes() for p in seg_dir.glob("*index")}
    assert before
    names = sorted(before)
    (seg_dir / names[0]).unlink()
    (seg_dir / names[1]).write_bytes(b"garbage")
    (seg_dir / names[2]).write_bytes(before[names[2]][:-3])
    log = open_log(**SMALL)
    assert [h.base_offset for h in all_batches(log)] == list(range(0, 60, 3))
    log.close()
    after = {p.name: p.read_bytes() for p in seg_dir.glob("*index")}
    assert after == before


def test_stale_index_pointing_elsewhere_is_rebuilt(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 20)
    log.close()
    path = tmp_path / "p0" / "00000000000000000000.index"
    index = OffsetIndex.from_bytes(path.read_bytes())
    assert index is not None and len(index)
    index.positions[-1] += 1
    path.write_bytes(index.to_bytes())
    log = open_log(**SMALL)
    for offset in range(0, 60):
        assert headers_of(log.read(offset, 1))[0].last_offset >= offset


def test_offset_for_timestamp(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    for i in range(20):
        ts = 1_000 + 10 * i
        log.append(batch(*values(3), timestamps=[ts, ts + 3, ts + 6]), now_ms=0)
    assert log.offset_for_timestamp(0) == (0, 1_000)
    assert log.offset_for_timestamp(1_000) == (0, 1_000)
    assert log.offset_for_timestamp(1_001) == (1, 1_003)
    assert log.offset_for_timestamp(1_007) == (3, 1_010)
    assert log.offset_for_timestamp(1_100) == (30, 1_100)
    assert log.offset_for_timestamp(1_196) == (59, 1_196)
    assert log.offset_for_timestamp(1_197) is None
    assert log.max_timestamp_offset() == (59, 1_196)
    for ts in range(990, 1_200):
        found = log.offset_for_timestamp(ts)
        expected = next(
            ((3 * i + j, 1_000 + 10 * i + 3 * j) for i in range(20) for j in range(3)
             if 1_000 + 10 * i + 3 * j >= ts),
            None,
        )
        assert found == expected, ts


def test_offset_for_timestamp_with_unordered_timestamps(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    stamps = [50, 10, 40, 20, 60, 30, 70, 5]
    for ts in stamps:
        log.append(batch((b"k", b"v"), ts=ts), now_ms=0)
    for target in range(0, 80):
        expected = next(((i, t) for i, t in enumerate(stamps) if t >= target), None)
        assert log.offset_for_timestamp(target) == expected


def test_time_index_survives_reopen(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 20)
    log.close()
    for path in (tmp_path / "p0").glob("*.timeindex"):
        index = TimeIndex.from_bytes(path.read_bytes())
        assert index is not None and len(index) >= 1
    log = open_log(**SMALL)
    assert log.offset_for_timestamp(1_010) == (30, 1_010)
    assert log.max_timestamp_offset() == (57, 1_019)


def test_reopen_keeps_offsets(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    fill(log, 7)
    log.close()
    log = open_log(**SMALL)
    assert (log.log_start_offset, log.log_end_offset, log.flushed_offset) == (0, 21, 21)
    info = log.append(batch(*values(2)), now_ms=1)
    assert info.base_offset == 21


def test_idle_log_holds_one_descriptor(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 30)
    log.close()
    before = len(os.listdir("/proc/self/fd"))
    log = open_log(**SMALL)
    assert len(os.listdir("/proc/self/fd")) == before + 1
    all_batches(log)  # reading everything keeps at most a few segments open
    assert len(os.listdir("/proc/self/fd")) <= before + 3


def test_delete_removes_directory(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    fill(log, 2)
    log.delete()
    assert not (tmp_path / "p0").exists()


def test_truncate_to(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    fill(log, 20)
    log.truncate_to(31)  # inside the batch 30..32: the whole batch goes
    assert log.log_end_offset == 30
    assert [h.base_offset for h in all_batches(log)][-1] == 27
    assert log.append(batch(*values(1)), now_ms=1).base_offset == 30
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.read(0, 100) == b""
    assert log.append(batch(*values(1)), now_ms=1).base_offset == 0


def test_closed_log_refuses(open_log: OpenLog) -> None:
    log = open_log()
    log.close()
    log.close()
    with pytest.raises(ValueError):
        log.append(batch(*values(1)), now_ms=1)


def test_open_creates_directory(tmp_path: Path) -> None:
    from samsa.log import LogConfig

    log = PartitionLog.open(tmp_path / "a" / "b", LogConfig(), now_ms=0)
    assert (tmp_path / "a" / "b" / "00000000000000000000.log").exists()
    log.close()


def test_reconfigure_changes_rolling(open_log: OpenLog) -> None:
    from samsa.log import LogConfig

    log = open_log()
    fill(log, 5)
    assert len(log.segments) == 1
    log.reconfigure(LogConfig.from_mapping({"segment.bytes": "200"}))
    fill(log, 5)
    assert len(log.segments) > 2
    assert [h.base_offset for h in all_batches(log)] == list(range(0, 30, 3))
