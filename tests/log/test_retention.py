from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.log import OffsetOutOfRange
from samsa.log.checkpoint import LOG_START_OFFSET, read_offset
from samsa.log.retention import segments_to_delete
from tests.log.conftest import OpenLog
from tests.log.helpers import all_batches, batch, fill, values

SMALL = {"segment_bytes": "400", "index_interval_bytes": "100"}


def test_retention_by_time(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(retention_ms="1000", **SMALL)
    fill(log, 20, ts0=10_000)  # batch i has timestamp 10_000 + i, 4 batches per segment
    assert [s.base_offset for s in log.segments] == [0, 12, 24, 36, 48]
    assert log.apply_retention(now_ms=11_003) == 0  # segment 0 max ts 10_003: exactly 1000 old
    assert log.apply_retention(now_ms=11_004) == 1
    assert log.log_start_offset == 12
    assert log.apply_retention(now_ms=11_012) == 2  # segment 24 max ts 10_011
    assert log.log_start_offset == 36
    assert log.apply_retention(now_ms=99_999) == 1  # the active segment is never deleted
    assert [s.base_offset for s in log.segments] == [48]
    assert log.log_start_offset == 48
    with pytest.raises(OffsetOutOfRange):
        log.read(47, 100)
    assert all_batches(log)[0].base_offset == 48
    assert read_offset(tmp_path / "p0", LOG_START_OFFSET) == 48
    assert not (tmp_path / "p0" / "00000000000000000000.log").exists()
    log.close()
    log = open_log(retention_ms="1000", **SMALL)
    assert (log.log_start_offset, log.log_end_offset) == (48, 60)


def test_infinite_retention_and_compact_policy_keep_everything(open_log: OpenLog) -> None:
    log = open_log(retention_ms="-1", **SMALL)
    fill(log, 20)
    assert log.apply_retention(now_ms=10**12) == 0
    log.close()
    log = open_log(cleanup_policy="compact", retention_ms="1", retention_bytes="1", **SMALL)
    assert log.apply_retention(now_ms=10**12) == 0
    assert log.log_start_offset == 0


def test_retention_by_bytes(open_log: OpenLog) -> None:
    log = open_log(retention_ms="-1", retention_bytes="1000", **SMALL)
    fill(log, 20)
    sizes = [s.size for s in log.segments]
    assert sizes == [376, 376, 382, 388, 388]
    assert log.apply_retention(now_ms=0) == 2  # 1910 -> 1158; one more would leave 776
    assert log.size_bytes == 1158
    assert log.log_start_offset == 24
    assert log.apply_retention(now_ms=0) == 0


def test_delete_records(open_log: OpenLog) -> None:
    log = open_log(retention_ms="-1", **SMALL)
    fill(log, 20)
    assert log.delete_records(14) == 14
    assert log.segments[0].base_offset == 12
    with pytest.raises(OffsetOutOfRange):
        log.read(13, 100)
    first = all_batches(log)[0]
    assert first.base_offset == 12 and first.last_offset >= 14  # containing batch
    assert log.delete_records(5) == 14  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records(61)
    assert log.delete_records(60) == 60
    assert log.read(60, 100) == b""
    assert log.append(batch(*values(1)), now_ms=0).base_offset == 60


def test_segments_to_delete_pure() -> None:
    def ts(i: int) -> int:
        return [100, 200, 300][i]

    kw: dict[str, Any] = {"active_size": 10, "log_start_offset": 0, "delete_policy": True}
    assert segments_to_delete(
        [10, 10, 10], [5, 10, 15], ts, now_ms=400, retention_ms=150, retention_bytes=-1, **kw
    ) == 2
    assert segments_to_delete(
        [10, 10, 10], [5, 10, 15], ts, now_ms=0, retention_ms=-1, retention_bytes=20, **kw
    ) == 2
    assert segments_to_delete(
        [10, 10, 10], [5, 10, 15], ts, now_ms=0, retention_ms=-1, retention_bytes=-1,
        active_size=10, log_start_offset=10, delete_policy=False,
    ) == 2
