"""The group runtime's loop timer: a later deadline defers the armed handle (no
cancel/re-create per heartbeat), an earlier one re-arms at once, cancel stops it."""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.broker.clock import now_ms
from samsa.broker.groups import LoopTimer
from samsa.coordinator import (
    Coordinator,
    CoordinatorConfig,
    GroupState,
    JoinGroup,
    SyncGroup,
    TimerKey,
    TimerKind,
)
from tests.coordinator.harness import PROTOCOLS


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
        timer = LoopTimer(runtime.fire)
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


# -- clocks that round against each other (issue: dead members never evicted) ------------


class SlowClock:
    """A millisecond clock that advances 1% slower than the loop's: every loop wake-up
    comes a little early by it, as when the broker's floored wall clock lags uvloop's."""

    def __init__(self) -> None:
        self._t0 = asyncio.get_running_loop().time()

    def __call__(self) -> int:
        return int((asyncio.get_running_loop().time() - self._t0) * 990)


def test_early_loop_wakeup_rearms_instead_of_firing_early() -> None:
    async def main() -> list[tuple[TimerKey, int, int]]:
        clock = SlowClock()
        fired: list[tuple[TimerKey, int, int]] = []
        deadlines = {KEY: 60, OTHER: 150}
        timer = LoopTimer(lambda k: fired.append((k, clock(), deadlines[k])), now=clock)
        try:
            for key, deadline in deadlines.items():
                timer.schedule(key, deadline)
            await _until(lambda: len(fired) == 2)
        finally:
            timer.close()
        return fired

    fired = asyncio.run(asyncio.wait_for(main(), 10))
    assert [k for k, _, _ in fired] == [KEY, OTHER]
    assert all(at >= deadline for _, at, deadline in fired), fired


def test_shard_rearms_a_timer_fired_early_by_its_clock() -> None:
    """The loop timer's clock runs ahead of the coordinator's: its fires reach the shard
    early. The shard must arm them again, or a dead member is never evicted."""
    async def main() -> tuple[GroupState, int]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        def shard_now() -> int:
            return int((loop.time() - t0) * 1000)

        def timer_now() -> int:  # 5 ms ahead of the coordinator
            return shard_now() + 5

        config = CoordinatorConfig(offsets_topic_num_partitions=1, min_session_timeout_ms=100,
                                   initial_rebalance_delay_ms=0)
        replies: list[Any] = []
        coord: Coordinator | None = None

        def fire(key: TimerKey) -> None:
            assert coord is not None
            replies.extend(r.response for r in coord.fire(key, shard_now()).replies)

        timer = LoopTimer(fire, now=timer_now)
        coord = Coordinator(config, timer, lambda prefix: f"{prefix}-1")
        coord.load(0, [], shard_now())
        try:
            join = JoinGroup(group_id="g", member_id="", protocol_type="consumer",
                             protocols=PROTOCOLS, session_timeout_ms=150,
                             rebalance_timeout_ms=150, group_instance_id="i",
                             client_id="c", client_host="/127.0.0.1",
                             require_known_member_id=True, supports_skip_assignment=True)
            result = coord.handle(join, shard_now(), "join")
            await _until(lambda: any(getattr(r, "generation_id", -1) == 1 for r in replies)
                         or any(getattr(x.response, "generation_id", -1) == 1
                                for x in result.replies))
            joined = [x.response for x in result.replies] + replies
            member = next(r.member_id for r in joined if getattr(r, "generation_id", -1) == 1)
            coord.handle(SyncGroup("g", 1, member, ((member, b""),), group_instance_id="i"),
                         shard_now(), "sync")
            shard = coord.shard_for("g")
            assert shard is not None
            assert shard.groups["g"].state is GroupState.STABLE
            # the member never heartbeats: its session (150 ms) must expire
            await _until(lambda: not shard.groups["g"].members, limit=3.0)
            return shard.groups["g"].state, len(shard.groups["g"].members)
        finally:
            timer.close()

    state, members = asyncio.run(asyncio.wait_for(main(), 10))
    assert members == 0
    assert state in (GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
