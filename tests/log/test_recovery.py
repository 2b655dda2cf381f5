"""Crash recovery: a log abandoned without close() (as after kill -9) and damaged tails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.log import LogConfig, PartitionLog
from samsa.log.checkpoint import RECOVERY_POINT, read_offset, write_offset
from tests.log.conftest import OpenLog
from tests.log.helpers import all_batches, batch, crash, fill, values

SMALL = {"segment_bytes": "400", "index_interval_bytes": "100"}
CFG = LogConfig.from_mapping({"segment.bytes": "400", "index.interval.bytes": "100"})


def last_log_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def test_unflushed_tail_survives_crash_when_intact(open_log: OpenLog) -> None:
    log = open_log(**SMALL)
    fill(log, 5)
    log.flush()
    fill(log, 5, ts0=2_000)
    crash(log)
    log = open_log(**SMALL)
    assert log.log_end_offset == 30
    assert [h.base_offset for h in all_batches(log)] == list(range(0, 30, 3))
    assert log.flushed_offset == 30


def test_truncated_mid_batch(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 10)
    log.flush()
    fill(log, 1, ts0=5_000)
    crash(log)
    path = last_log_file(tmp_path / "p0")
    size = path.stat().st_size
    os.truncate(path, size - 7)
    log = open_log(**SMALL)
    assert log.log_end_offset == 30
    assert [h.base_offset for h in all_batches(log)] == list(range(0, 30, 3))
    assert log.append(batch(*values(1)), now_ms=1).base_offset == 30


def test_flipped_byte_in_tail_truncates_from_there(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes="100000")
    fill(log, 4)
    log.flush()
    fill(log, 4, ts0=3_000)
    crash(log)
    path = last_log_file(tmp_path / "p0")
    data = bytearray(path.read_bytes())
    sizes = [h.size for h in log.segments[-1].headers()]
    sixth_batch = sum(sizes[:5])
    data[sixth_batch + 70] ^= 0xFF  # inside the records of batch 5 (offsets 15..17)
    path.write_bytes(bytes(data))
    log = open_log(segment_bytes="100000")
    assert log.log_end_offset == 15
    assert [h.base_offset for h in all_batches(log)] == [0, 3, 6, 9, 12]
    assert log.segments[-1].size == sixth_batch


def test_flipped_byte_below_recovery_point_is_trusted(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes="100000")
    fill(log, 4)
    log.flush()
    path = last_log_file(tmp_path / "p0")
    data = bytearray(path.read_bytes())
    first_size = next(log.segments[-1].headers()).size
    data[first_size - 2] ^= 0xFF  # record bytes of a fsynced batch: not re-checked
    crash(log)
    path.write_bytes(bytes(data))
    log = open_log(segment_bytes="100000")
    assert log.log_end_offset == 12


def test_missing_recovery_point_checks_everything(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 12)
    crash(log)
    (tmp_path / "p0" / RECOVERY_POINT).unlink()
    first = sorted((tmp_path / "p0").glob("*.log"))[1]
    data = bytearray(first.read_bytes())
    data[-1] ^= 0x01
    first.write_bytes(bytes(data))
    log = open_log(**SMALL)
    # Corruption in the second segment: it is cut there and later segments are dropped.
    batches = [h.base_offset for h in all_batches(log)]
    assert batches == list(range(0, log.log_end_offset, 3))
    assert log.log_end_offset < 36
    assert len(log.segments) == 2
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == log.log_end_offset


def test_leftover_temporary_files_are_removed(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 6)
    log.close()
    d = tmp_path / "p0"
    (d / "00000000000000000000.log.cleaned").write_bytes(b"half written")
    (d / "recovery-point.tmp").write_bytes(b"")
    (d / "00000000000000000999.index").write_bytes(b"")
    log = open_log(**SMALL)
    names = set(os.listdir(d))
    assert not any(n.endswith((".cleaned", ".tmp")) for n in names)
    assert "00000000000000000999.index" not in names
    assert log.log_end_offset == 18


def test_overlapping_segment_is_dropped(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**SMALL)
    fill(log, 12)
    log.close()
    d = tmp_path / "p0"
    segs = sorted(d.glob("*.log"))
    # A stray segment whose base lies inside its predecessor's offsets.
    (d / "00000000000000000001.log").write_bytes(segs[0].read_bytes())
    write_offset(d, RECOVERY_POINT, 0)
    log = open_log(**SMALL)
    assert [s.base_offset for s in log.segments] == [0]
    assert log.log_end_offset == 12


def _synced_bytes(files: list[Path], durable: int) -> int:
    """Bytes of the batches below ``durable`` (every test batch holds 3 records)."""
    offsets, synced = 0, 0
    for f in files:
        data = f.read_bytes()
        pos = 0
        while pos < len(data) and offsets < durable:
            size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
            offsets += 3
            pos += size
            synced += size
    return synced


def _damage(files: list[Path], keep: int, flip: int | None) -> None:
    """Keep the first ``keep`` bytes of the log (as one stream); maybe flip byte ``flip``."""
    for f in files:
        data = bytearray(f.read_bytes())
        if flip is not None and 0 <= flip < len(data):
            data[flip] ^= 0x5A
        if flip is not None:
            flip -= len(data)
        f.write_bytes(bytes(data[: max(0, keep)]))
        keep -= len(data)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    flushed=st.integers(min_value=0, max_value=12),
    total=st.integers(min_value=1, max_value=12),
    cut=st.floats(min_value=0.0, max_value=1.0),
    flip=st.none() | st.floats(min_value=0.0, max_value=1.0),
)
def test_random_damage_past_recovery_point_reopens_with_prefix(
    tmp_path_factory: pytest.TempPathFactory,
    flushed: int,
    total: int,
    cut: float,
    flip: float | None,
) -> None:
    d = tmp_path_factory.mktemp("crash")
    log = PartitionLog.open(d, CFG, now_ms=0)
    flushed = min(flushed, total)
    fill(log, flushed)
    log.flush()
    durable = log.flushed_offset
    fill(log, total - flushed, ts0=2_000)
    crash(log)
    # Lose an arbitrary suffix of the unsynced bytes and maybe corrupt one of them.
    files = sorted(d.glob("*.log"))
    total_bytes = sum(f.stat().st_size for f in files)
    synced = _synced_bytes(files, durable)
    keep = synced + int((total_bytes - synced) * cut)
    flip_at = None if flip is None else synced + int((total_bytes - synced) * flip)
    _damage(files, keep, flip_at)
    log = PartitionLog.open(d, CFG, now_ms=0)
    try:
        bases = [h.base_offset for h in all_batches(log)]
        assert bases == list(range(0, log.log_end_offset, 3))
        assert durable <= log.log_end_offset <= 3 * total
        log.append(batch(*values(3)), now_ms=0)
        again = [h.base_offset for h in all_batches(log)]
        assert again == list(range(0, log.log_end_offset, 3))
    finally:
        log.close()


@pytest.mark.parametrize("byte", range(8))
def test_damaged_base_offset_past_recovery_point(
    open_log: OpenLog, tmp_path: Path, byte: int
) -> None:
    log = open_log(segment_bytes="100000")
    fill(log, 2)
    log.flush()
    fill(log, 2, ts0=3_000)
    crash(log)
    path = last_log_file(tmp_path / "p0")
    data = bytearray(path.read_bytes())
    third = sum(h.size for h in list(log.segments[-1].headers())[:2])
    data[third + byte] ^= 0x01  # baseOffset is outside the CRC
    path.write_bytes(bytes(data))
    log = open_log(segment_bytes="100000")
    assert log.log_end_offset == 6
    assert [h.base_offset for h in all_batches(log)] == [0, 3]
