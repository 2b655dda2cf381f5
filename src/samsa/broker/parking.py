"""Parking a task until something happens or its wait runs out: request handlers (Fetch and
ShareFetch long polls, :func:`park`) and loops woken by an event (:func:`wait_event`).

Both are ``asyncio.wait_for`` without its Python 3.11 flaw (gh-86296): there, a task
cancelled in the same loop pass as its wake-up returns normally, the cancellation lost (a
handler goes on serving a connection that is gone: a ShareFetch would acquire records for
a closed session; a loop being stopped runs another round).
"""

from __future__ import annotations

import asyncio
from typing import Any


async def park(fut: asyncio.Future[Any], timeout: float) -> None:
    """Wait until ``fut`` is done or ``timeout`` seconds have passed. A cancellation of
    the waiting task always propagates (``fut`` itself is left alone)."""
    await asyncio.wait((fut,), timeout=timeout)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds have passed; whether it is set. A
    cancellation of the waiting task always propagates."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()
    return event.is_set()
