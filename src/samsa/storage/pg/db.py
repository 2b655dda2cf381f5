"""A connection pool on a thread of its own.

The broker's loop calls :meth:`Database.run` (awaitable) for nearly everything (appends,
reads, lease ticks, topic changes) and :meth:`Database.run_sync` where nothing can await
(the start, and the port's blocking fallbacks for callers that cannot await). Both hand a
coroutine function the pool on the database thread's own event loop, so a synchronous call
never needs the broker's loop to turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")

Job = Callable[[Any], Awaitable[T]]
"""A coroutine function of the pool (an ``asyncpg.Pool``)."""


class Database:
    """An asyncpg pool served by a dedicated thread and event loop."""

    def __init__(self, dsn: str, *, min_size: int = 2, max_size: int = 8) -> None:
        self.dsn = dsn
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="samsa-pg",
                                        daemon=True)
        self._thread.start()
        self._pool: Any = None
        self._min, self._max = min_size, max_size

    def open(self, timeout: float = 30.0) -> None:
        """Connect (raises on a bad DSN or an unreachable server)."""

        async def connect() -> Any:
            return await asyncpg.create_pool(self.dsn, min_size=self._min, max_size=self._max,
                                             command_timeout=60)

        fut = asyncio.run_coroutine_threadsafe(connect(), self._loop)
        self._pool = fut.result(timeout)

    def submit(self, job: Job[T]) -> concurrent.futures.Future[T]:
        assert self._pool is not None, "database not open"
        return asyncio.run_coroutine_threadsafe(_call(job, self._pool), self._loop)

    async def run(self, job: Job[T]) -> T:
        """Run ``job(pool)`` on the database thread; await its result on the caller's loop."""
        return await asyncio.wrap_future(self.submit(job))

    def run_sync(self, job: Job[T], timeout: float = 30.0) -> T:
        """Run ``job(pool)`` and block until it finishes (never call from the DB thread)."""
        return self.submit(job).result(timeout)

    def close(self, timeout: float = 10.0) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                asyncio.run_coroutine_threadsafe(pool.close(), self._loop).result(timeout)
            except Exception:
                pool.terminate()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()


async def _call(job: Job[T], pool: Any) -> T:
    return await job(pool)
