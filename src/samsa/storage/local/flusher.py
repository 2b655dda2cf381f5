"""Group commit: acks=all produce requests and group records share fsyncs.

A write that needs its data on disk awaits :meth:`Flusher.sync` (through
:meth:`LocalPartition.wait_durable <samsa.storage.local.partition.LocalPartition.wait_durable>`).
One worker thread fsyncs every partition that has waiters; requests arriving while an
fsync runs are collected and served by the next round, so N concurrent writers cost about
one fsync.
"""

from __future__ import annotations

import asyncio

from samsa.log import PartitionLog


class Flusher:
    """Batches fsync requests per event loop."""

    def __init__(self) -> None:
        self._pending: dict[PartitionLog, list[tuple[int, asyncio.Future[None]]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.fsyncs = 0

    async def sync(self, log: PartitionLog, offset: int) -> None:
        """Return once everything below ``offset`` in ``log`` is on disk."""
        if log.flushed_offset >= offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(log, []).append((offset, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending, {}
            try:
                await loop.run_in_executor(None, _flush_all, list(batch))
                self.fsyncs += 1
                error: BaseException | None = None
            except OSError as exc:
                error = exc
            for waiters in batch.values():
                for _, fut in waiters:
                    if fut.done():
                        continue
                    if error is None:
                        fut.set_result(None)
                    else:
                        fut.set_exception(error)


def _flush_all(logs: list[PartitionLog]) -> None:
    for log in logs:
        log.flush()
