"""A deterministic timer service for the coordinator core: a fake clock plus a deadline
table (the test-side twin of the broker's LoopTimer)."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from samsa.coordinator import TimerKey


class FakeTimer:
    """A deterministic timer for tests: a fake clock plus a deadline table.

    ``advance(ms)`` moves the clock, firing due keys one at a time in deadline order through
    ``on_fire(key, now_ms)`` (set by the test); a fired callback may schedule or cancel others.
    """

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self.deadlines: dict[TimerKey, int] = {}
        self.on_fire: Callable[[TimerKey, int], None] | None = None

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: TimerKey) -> None:
        self.deadlines.pop(key, None)

    def next_deadline(self) -> int | None:
        return min(self.deadlines.values(), default=None)

    def advance(self, ms: int) -> list[TimerKey]:
        """Advance the clock by ``ms``, firing every due timer; returns the fired keys."""
        target = self.now_ms + ms
        fired: list[TimerKey] = []
        while True:
            due = [(d, k) for k, d in self.deadlines.items() if d <= target]
            if not due:
                break
            deadline, key = heapq.nsmallest(1, due)[0]
            del self.deadlines[key]
            self.now_ms = max(self.now_ms, deadline)
            fired.append(key)
            if self.on_fire is not None:
                self.on_fire(key, self.now_ms)
        self.now_ms = target
        return fired
