"""A parked handler cancelled in the same loop pass as its wake-up (a Fetch or ShareFetch
long poll whose connection closes as records arrive): the cancellation propagates, where
Python 3.11's ``asyncio.wait_for`` returns normally and loses it (gh-86296)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from samsa.broker.parking import park, wait_event

Park = Callable[[asyncio.Future[Any], float], Awaitable[Any]]


async def _woken_and_cancelled(wait: Park) -> str:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    async def handler() -> str:
        await wait(fut, 10)
        return "served a closed connection"

    task = asyncio.ensure_future(handler())
    await asyncio.sleep(0)  # parked
    fut.set_result(None)  # new records ...
    task.cancel()  # ... as the connection closes
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


def test_a_cancelled_parked_handler_is_cancelled_even_when_woken() -> None:
    assert asyncio.run(_woken_and_cancelled(park)) == "cancelled"


def test_park_returns_on_wake_up_and_on_timeout() -> None:
    async def scenario() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        loop.call_soon(woken.set_result, None)
        await park(woken, 10)
        idle: asyncio.Future[None] = loop.create_future()
        await park(idle, 0.01)
        return woken.done(), idle.done()

    assert asyncio.run(scenario()) == (True, False)


@pytest.mark.skipif(__import__("sys").version_info >= (3, 12),
                    reason="wait_for keeps the cancellation since Python 3.12")
def test_wait_for_loses_the_cancellation_on_python_3_11() -> None:
    """Why :func:`park` exists: the same scenario with ``asyncio.wait_for``."""
    assert asyncio.run(_woken_and_cancelled(asyncio.wait_for)) == "served a closed connection"


def test_a_loop_waiting_on_an_event_is_cancelled_even_when_woken() -> None:
    """:func:`wait_event` (the cluster node's and the console's loops, the transaction
    coordinator's wait for markers): the same race, an :class:`asyncio.Event`."""

    async def scenario() -> tuple[str, bool, bool]:
        event = asyncio.Event()

        async def loop_round() -> str:
            await wait_event(event, 10)
            return "ran another round"

        task = asyncio.ensure_future(loop_round())
        await asyncio.sleep(0)  # waiting
        event.set()  # woken ...
        task.cancel()  # ... as it is stopped
        try:
            outcome = await task
        except asyncio.CancelledError:
            outcome = "cancelled"
        idle = asyncio.Event()
        return outcome, await wait_event(idle, 0.01), await wait_event(event, 10)

    assert asyncio.run(scenario()) == ("cancelled", False, True)
