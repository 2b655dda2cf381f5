from __future__ import annotations

import os
import threading
from pathlib import Path

from samsa.log.checkpoint import RECOVERY_POINT, read_offset
from tests.log.conftest import OpenLog
from tests.log.helpers import all_batches, batch, fill, values


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_flush_advances_flushed_offset(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    fill(log, 3)
    assert log.flushed_offset == 0
    assert log.flush() == 9
    assert log.flushed_offset == 9
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == 9
    assert log.flush() == 9


def test_recovery_point_checkpoint_lags_fsyncs_by_at_most_the_interval(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log()
    fill(log, 3)
    assert log.flush() == 9
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == 9
    fill(log, 2)
    assert log.flush() == 15  # fsynced, but the checkpoint was written just now: it lags
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == 9
    assert log.flush(checkpoint=True) == 15
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == 15
    fill(log, 1)
    log.flush()
    log.close()  # closing always writes it
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == 18


def test_flush_from_thread_while_appending(open_log: OpenLog, tmp_path: Path) -> None:
    fds_before = open_fds()
    log = open_log(segment_bytes="300", index_interval_bytes="50")
    stop = threading.Event()
    errors: list[BaseException] = []
    observed: list[tuple[int, int]] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                end_before = log.log_end_offset
                flushed = log.flush()
                observed.append((end_before, flushed))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(300):
            log.append(batch(*values(2, prefix=b"%d-" % i)), now_ms=i)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert observed
    # A flush covers at least what was appended before it started.
    assert all(flushed >= end_before for end_before, flushed in observed)
    assert [f for _, f in observed] == sorted(f for _, f in observed)
    log.flush(checkpoint=True)
    assert log.flushed_offset == log.log_end_offset == 600
    assert [h.base_offset for h in all_batches(log)] == list(range(0, 600, 2))
    assert read_offset(tmp_path / "p0", RECOVERY_POINT) == 600
    log.close()
    assert open_fds() == fds_before  # rolled segments' descriptors were all closed
