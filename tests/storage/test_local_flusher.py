"""Group commit of the local engine (:mod:`samsa.storage.local.flusher`) on real segment
files: partitions fsync side by side, and a failed fsync fails the writes waiting for it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.log import LogConfig
from samsa.storage.local import LocalPartition
from samsa.storage.local.flusher import Flusher
from tests.records import make_batch

Opener = Callable[[str], LocalPartition]


@pytest.fixture
def opener(tmp_path: Path) -> Iterator[Opener]:
    """Opens partitions sharing one flusher; closes them and the flusher afterwards."""
    flusher = Flusher()
    logs: list[LocalPartition] = []

    def open_(name: str) -> LocalPartition:
        logs.append(LocalPartition.open_with(tmp_path / name, LogConfig(), flusher,
                                             now_ms=int(time.time() * 1000)))
        return logs[-1]

    yield open_
    for log in logs:
        log.close()
    flusher.close()


def _append(log: LocalPartition, value: bytes) -> int:
    """Append one record; the offset a durability wait for it names."""
    return log.append(make_batch([(None, value)]), int(time.time() * 1000)).last_offset + 1


def test_a_slow_fsync_delays_no_other_partition(opener: Opener,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    slow, fast = opener("slow-0"), opener("fast-0")
    release = threading.Event()
    real_flush = slow.flush

    def held_flush(*, checkpoint: bool = False) -> int:
        release.wait(10)
        return real_flush(checkpoint=checkpoint)

    monkeypatch.setattr(slow, "flush", held_flush)

    async def main() -> None:
        held = asyncio.ensure_future(slow.wait_durable(_append(slow, b"a")))
        await asyncio.sleep(0.05)
        end = _append(fast, b"b")
        await asyncio.wait_for(fast.wait_durable(end), 5)
        assert fast.flushed_offset >= end
        assert not held.done()
        later = _append(slow, b"c")  # appended while the slow fsync runs
        waiting = asyncio.ensure_future(slow.wait_durable(later))
        release.set()
        await asyncio.wait_for(asyncio.gather(held, waiting), 5)
        assert slow.flushed_offset >= later

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_a_failed_fsync_fails_the_writes_waiting_for_it(
        opener: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    log = opener("t-0")
    real_flush = log.flush
    failing = [True]

    def flush(*, checkpoint: bool = False) -> int:
        if failing[0]:
            raise OSError(5, "Input/output error")
        return real_flush(checkpoint=checkpoint)

    monkeypatch.setattr(log, "flush", flush)

    async def main() -> None:
        ends = [_append(log, b"a"), _append(log, b"b")]
        results = await asyncio.gather(*(log.wait_durable(e) for e in ends),
                                       return_exceptions=True)
        assert all(isinstance(r, OSError) for r in results), results
        assert log.flushed_offset == 0
        failing[0] = False  # the disk is back: the next write waits for a real fsync
        end = _append(log, b"c")
        await asyncio.wait_for(log.wait_durable(end), 5)
        assert log.flushed_offset >= end

    asyncio.run(main())
