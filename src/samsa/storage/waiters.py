"""Callers waiting until an offset is durable, for engines that commit in the background
(:meth:`~samsa.broker.storage.PartitionStore.wait_durable`)."""

from __future__ import annotations

import asyncio


class Waiters:
    """Futures of callers waiting for offsets; the engine resolves them as commits land,
    or fails them all when the writes will never land (the lease moved)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []

    async def wait(self, offset: int) -> None:
        """Return once :meth:`reached` passes ``offset``; raise what :meth:`fail` gives."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((offset, fut))
        await fut

    def reached(self, end: int) -> None:
        """Every offset below ``end`` is durable."""
        keep = []
        for offset, fut in self._waiting:
            if offset <= end:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((offset, fut))
        self._waiting = keep

    def fail(self, error: BaseException) -> None:
        """Nothing waited for will become durable."""
        waiting, self._waiting = self._waiting, []
        for _, fut in waiting:
            if not fut.done():
                fut.set_exception(error)
