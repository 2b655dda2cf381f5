"""Which node coordinates the group, and when the next lookup may go: pure, no I/O.

One :class:`CoordinatorTracker` sits in every member machine (the base
:class:`~samsa.client.group.machine.MemberMachine` holds it), as Kafka's
``CoordinatorRequestManager`` serves its heartbeat and commit managers alike. The driver's
:mod:`~samsa.client.group.discovery` sends the FindCoordinator; the machine tells the
tracker what came of it, and what the other requests learnt (NOT_COORDINATOR, a lost
connection).
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = ["LOOKUP_RETRIABLE", "CoordinatorTracker"]

LOOKUP_RETRIABLE = frozenset({ErrorCode.none, ErrorCode.coordinator_load_in_progress,
                              ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
                              ErrorCode.request_timed_out, ErrorCode.network_exception})
"""FindCoordinator outcomes after which the member looks again (after a backoff); any other
error is fatal (GROUP_AUTHORIZATION_FAILED, a malformed answer, ...)."""


@dataclass
class CoordinatorTracker:
    """The coordinator's node id (None: unknown) and the backoff before the next lookup;
    all times are milliseconds from the caller."""

    retry_backoff_ms: float
    node: int | None = None
    retry_at: float = 0.0
    """No lookup (and, for the classic join, no JoinGroup) before this time."""

    def found(self, node: int) -> None:
        self.node = node

    def lost(self, now: float) -> None:
        """The coordinator is unknown from now on; look it up again after the backoff."""
        self.node = None
        self.back_off(now)

    def lookup_failed(self, code: int, now: float) -> bool:
        """A lookup failed with ``code``: True when that is fatal (not retriable)."""
        self.lost(now)
        return code not in LOOKUP_RETRIABLE

    def back_off(self, now: float) -> None:
        """Nothing for this member's coordinator before one backoff from ``now``."""
        self.retry_at = now + self.retry_backoff_ms

    def lookup_due(self, now: float) -> bool:
        """True when the coordinator is unknown and its backoff is over."""
        return self.node is None and now >= self.retry_at
