"""A request's handler runs at once up to its first wait (broker.server._start): an answer
ready then is a done future; one that waits finishes in a task with the awaited outcome,
and cancelling that task cancels the handler where it waits, as a task's cancel does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.broker.server import _start


async def _ready() -> bytes:
    return b"now"


async def _fails() -> bytes:
    raise ValueError("bad frame")


async def _waits(fut: asyncio.Future[bytes], seen: list[str]) -> bytes:
    seen.append("started")
    try:
        got = await fut
    except asyncio.CancelledError:
        seen.append("cancelled")
        raise
    await asyncio.sleep(0)  # a bare yield
    return got + b"!"


def _run(scenario: Any) -> Any:
    return asyncio.run(scenario())


def test_a_ready_answer_is_a_done_future_and_a_failure_its_exception() -> None:
    async def scenario() -> None:
        ok = _start(_ready())
        assert ok.done() and ok.result() == b"now"
        bad = _start(_fails())
        assert bad.done()
        with pytest.raises(ValueError, match="bad frame"):
            await bad

    _run(scenario)


def test_a_waiting_handler_starts_at_once_and_finishes_with_the_outcome() -> None:
    async def scenario() -> None:
        seen: list[str] = []
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        task = _start(_waits(fut, seen))
        assert seen == ["started"] and not task.done()
        fut.set_result(b"later")
        assert await task == b"later!"
        failing: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        task = _start(_waits(failing, seen))
        failing.set_exception(KeyError("gone"))
        with pytest.raises(KeyError):
            await task

    _run(scenario)


@pytest.mark.parametrize("awaited_done", [False, True])
def test_cancelling_a_waiting_handler_cancels_it_where_it_waits(awaited_done: bool) -> None:
    async def scenario() -> None:
        seen: list[str] = []
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        task = _start(_waits(fut, seen))
        await asyncio.sleep(0)
        if awaited_done:  # the awaited outcome came, but the task is cancelled first
            fut.set_result(b"late")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["started", "cancelled"]

    _run(scenario)


def test_handlers_may_wait_on_one_future() -> None:
    """Two handlers started at once both wait on one shared future (a coalesced write):
    the second may await it, as a task's step allows."""
    async def scenario() -> None:
        seen: list[str] = []
        shared: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        first = _start(_waits(shared, seen))
        second = _start(_waits(shared, seen))
        shared.set_result(b"once")
        assert (await first, await second) == (b"once!", b"once!")

    _run(scenario)
