"""Parking a request handler until something happens or its wait runs out (Fetch and
ShareFetch long polls).

:func:`park` is ``asyncio.wait_for`` without its Python 3.11 flaw (gh-86296): there, a
handler cancelled (its connection closed) in the same loop pass as its wake-up returns
normally, the cancellation lost, and goes on serving a connection that is gone (a
ShareFetch would acquire records for a closed session, held until their locks expire).
"""

from __future__ import annotations

import asyncio
from typing import Any


async def park(fut: asyncio.Future[Any], timeout: float) -> None:
    """Wait until ``fut`` is done or ``timeout`` seconds have passed. A cancellation of
    the waiting task always propagates (``fut`` itself is left alone)."""
    await asyncio.wait((fut,), timeout=timeout)
