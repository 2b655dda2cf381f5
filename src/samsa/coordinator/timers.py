"""Keyed timers injected into the coordinator.

The shard asks its :class:`Timer` to ``schedule(key, deadline_ms)`` or ``cancel(key)``; when a
deadline passes, the owner of the loop calls ``Coordinator.fire(key, now_ms)`` (or
``CoordinatorShard.fire``) and handles the returned result like a request's. Scheduling a key
again replaces its deadline. A stale fire is ignored by the shard, so a timer implementation
may be sloppy about cancellation; an early fire (the loop's clock ahead of the shard's) makes
the shard schedule the key again at its deadline, so it is never lost.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class TimerKind(enum.Enum):
    INITIAL_REBALANCE_DELAY = "initial-rebalance-delay"
    REBALANCE_TIMEOUT = "rebalance-timeout"
    SESSION = "session"
    PENDING_MEMBER = "pending-member"
    PENDING_SYNC = "pending-sync"
    OFFSETS_EXPIRY = "offsets-expiry"


@dataclass(frozen=True)
class TimerKey:
    """Identifies one timer: its shard (partition), kind, group and member."""

    partition: int
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""

    def __lt__(self, other: object) -> bool:  # enums do not order; compare by value tuple
        if not isinstance(other, TimerKey):
            return NotImplemented
        return self._tuple() < other._tuple()

    def _tuple(self) -> tuple[int, str, str, str]:
        return (self.partition, self.kind.value, self.group_id, self.member_id)


class Timer(Protocol):
    """What the coordinator needs from the event loop's timer service."""

    def schedule(self, key: TimerKey, deadline_ms: int) -> None: ...

    def cancel(self, key: TimerKey) -> None: ...


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
