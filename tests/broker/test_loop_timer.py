"""The group runtime's loop timer: a later deadline defers the armed handle (no
cancel/re-create per heartbeat), an earlier one re-arms at once, cancel stops it."""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.broker.clock import now_ms
from samsa.broker.groups import LoopTimer
from samsa.coordinator import TimerKey, TimerKind


class Runtime:
    def __init__(self) -> None:
        self.fired: list[tuple[TimerKey, int]] = []

    def fire(self, key: TimerKey) -> None:
        self.fired.append((key, now_ms()))


KEY = TimerKey(0, TimerKind.SESSION, "g", "m")
OTHER = TimerKey(0, TimerKind.SESSION, "g", "n")


def run(scenario: Any) -> Runtime:
    runtime = Runtime()

    async def main() -> None:
        timer = LoopTimer(runtime)  # type: ignore[arg-type]
        try:
            await scenario(timer, runtime)
        finally:
            timer.close()

    asyncio.run(asyncio.wait_for(main(), 10))
    return runtime


async def _until(pred: Any, limit: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not pred():
        assert loop.time() < deadline, "timer did not fire"
        await asyncio.sleep(0.005)


def test_later_deadline_defers_the_fire() -> None:
    async def scenario(timer: LoopTimer, rt: Runtime) -> None:
        start = now_ms()
        timer.schedule(KEY, start + 30)
        for step in range(1, 6):  # heartbeats push the deadline later
            await asyncio.sleep(0.01)
            timer.schedule(KEY, start + 30 + 40 * step)
        last = start + 30 + 40 * 5
        await _until(lambda: bool(rt.fired))
        await asyncio.sleep(0.05)
        assert len(rt.fired) == 1
        assert rt.fired[0][1] >= last - 2  # never before the latest deadline

    run(scenario)


def test_earlier_deadline_rearms_at_once_and_cancel_stops() -> None:
    async def scenario(timer: LoopTimer, rt: Runtime) -> None:
        timer.schedule(KEY, now_ms() + 60_000)
        timer.schedule(KEY, now_ms() + 20)
        timer.schedule(OTHER, now_ms() + 20)
        timer.cancel(OTHER)
        await _until(lambda: bool(rt.fired))
        await asyncio.sleep(0.1)
        assert [k for k, _ in rt.fired] == [KEY]

    run(scenario)


def test_rescheduled_after_firing() -> None:
    async def scenario(timer: LoopTimer, rt: Runtime) -> None:
        timer.schedule(KEY, now_ms() + 10)
        await _until(lambda: len(rt.fired) == 1)
        timer.schedule(KEY, now_ms() + 10)
        await _until(lambda: len(rt.fired) == 2)

    run(scenario)
