"""Group commit: acks=all produce requests and group records share fsyncs.

A write that needs its data on disk awaits :meth:`Flusher.sync` (through
:meth:`LocalPartition.wait_durable <samsa.storage.local.partition.LocalPartition.wait_durable>`).
Each partition commits on its own: one fsync at a time per partition, on a worker thread,
covering every append made before it started; writers arriving while it runs are served by
the partition's next fsync (or at once, if the running one already covered them), so N
concurrent writers of a partition cost about one fsync. Partitions fsync side by side: a
slow fsync of one delays no other, and the disk gets several at once to merge (on ext4 and
a virtual disk, about 2x the bytes per second of fsyncing them one after the other).

A failed fsync fails every waiter it was to serve (the produce answers
KAFKA_STORAGE_ERROR); so does a log closed or truncated below a waiter's offset.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from samsa.log import PartitionLog

FSYNC_THREADS = 8
"""Partitions fsynced at once (threads of the flusher's own pool, so fsyncs never queue
behind compaction or name lookups in the loop's default executor)."""


class Flusher:
    """Schedules the fsyncs of the partitions of one event loop."""

    def __init__(self) -> None:
        self._waiting: dict[PartitionLog, list[tuple[int, asyncio.Future[None]]]] = {}
        self._running: dict[PartitionLog, asyncio.Task[None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.fsyncs = 0

    def close(self) -> None:
        """Stop the fsync threads once the fsyncs under way are done."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    async def sync(self, log: PartitionLog, offset: int) -> None:
        """Return once everything below ``offset`` in ``log`` is on disk."""
        if log.flushed_offset >= offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(log, []).append((offset, fut))
        if log not in self._running:
            self._running[log] = asyncio.create_task(self._run(log))
        await fut

    async def _run(self, log: PartitionLog) -> None:
        """fsync ``log`` while writers wait for it."""
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(FSYNC_THREADS, thread_name_prefix="samsa-fsync")
        try:
            while waiters := self._waiting.pop(log, None):
                # Every waiter appended before it asked, so the fsync covers it.
                try:
                    flushed = await loop.run_in_executor(self._pool, log.flush)
                    self.fsyncs += 1
                    error: OSError | None = None
                except Exception as exc:  # the write is not durable: KAFKA_STORAGE_ERROR
                    flushed = -1
                    error = exc if isinstance(exc, OSError) else OSError(f"fsync failed: {exc}")
                for offset, fut in waiters:
                    _settle(fut, offset, flushed, error)
                # Writers that came during the fsync and were covered by it.
                later = self._waiting.pop(log, [])
                keep = [(o, f) for o, f in later if o > log.flushed_offset]
                for offset, fut in later:
                    if offset <= log.flushed_offset and not fut.done():
                        fut.set_result(None)
                if keep:
                    self._waiting[log] = keep
        finally:
            del self._running[log]


def _settle(fut: asyncio.Future[None], offset: int, flushed: int,
            error: OSError | None) -> None:
    if fut.done():
        return
    if error is None and offset > flushed:
        error = OSError(f"offset {offset} was not made durable (the log was closed or "
                        f"truncated at {flushed})")
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)
