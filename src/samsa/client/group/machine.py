"""The base of every group member's state machine: pure, no sockets, no clock.

:class:`MemberMachine` holds what a member is whatever its protocol: its config, member id,
fatal error, coordinator (a :class:`~samsa.client.group.tracker.CoordinatorTracker`),
heartbeat bookkeeping, poll timer and history; and it declares what the shared parts of the
driver ask of it (:mod:`~samsa.client.group.context`, :mod:`~samsa.client.group.heartbeat`,
:mod:`~samsa.client.group.discovery`, :mod:`~samsa.client.group.commits`,
:mod:`~samsa.client.group.driver`). A protocol is a subclass that adds its states, its
requests and its answers: :class:`~samsa.client.group.classic_machine.Membership`
(JoinGroup/SyncGroup/Heartbeat) and, through
:class:`~samsa.client.group.epoch_machine.EpochMembership` (the member-epoch lifecycle),
:class:`~samsa.client.group.consumer_machine.ConsumerMembership` (ConsumerGroupHeartbeat).

Every event carries ``now`` in milliseconds; what the member should do comes back as
actions (:mod:`~samsa.client.group.actions` and the protocol's own).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from samsa.client.group.actions import NO_MEMBER_ID, RaiseError
from samsa.client.group.tracker import CoordinatorTracker

__all__ = ["GroupConfig", "MemberMachine"]


class GroupConfig(Protocol):
    """What every protocol's member config holds."""

    @property
    def group_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...
    @property
    def retry_backoff_ms(self) -> int: ...


C = TypeVar("C", bound=GroupConfig)

HISTORY_LINES = 100
"""The machine keeps about this many recent log lines (see :attr:`MemberMachine.history`)."""


@dataclass
class MemberMachine(ABC, Generic[C]):
    """One member of a group; all times are milliseconds from the caller."""

    config: C
    auto_commit: bool = False
    member_id: str = NO_MEMBER_ID
    fatal: RaiseError | None = None
    """Set once: every later ``poll`` raises it."""
    heartbeat_in_flight: bool = False
    last_poll: float = 0.0
    """When the user last called ``poll`` (the max-poll-interval timer)."""
    last_heartbeat_ok: float = 0.0
    next_heartbeat: float = 0.0
    history: list[str] = field(default_factory=list)
    """Recent transitions and errors, oldest first (for ``Consumer.group_status()``)."""
    tracker: CoordinatorTracker = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tracker = CoordinatorTracker(self.config.retry_backoff_ms)

    # ---- what the shared driver asks ---------------------------------------------------

    @property
    @abstractmethod
    def state(self) -> enum.Enum:
        """The protocol's member state."""

    @property
    @abstractmethod
    def generation(self) -> int:
        """The generation (classic) or member epoch (consumer) the member is in."""

    @property
    def coordinator(self) -> int | None:
        """The coordinator's node id; None while it is unknown."""
        return self.tracker.node

    @property
    def retry_at(self) -> float:
        """No FindCoordinator before this time (after a failed lookup or a lost coordinator)."""
        return self.tracker.retry_at

    @property
    def is_static(self) -> bool:
        return self.config.group_instance_id is not None

    @abstractmethod
    def needs_rejoin(self) -> bool:
        """True until the member is settled in the group with its assignment."""

    @abstractmethod
    def commit_identity(self) -> tuple[int, str] | None:
        """(generation or epoch, member id) for OffsetCommit; None: no commit now."""

    @abstractmethod
    def on_commit_error(self, code: int, now: float, generation: int) -> Sequence[object]:
        """An OffsetCommit sent with ``generation`` failed with ``code``."""

    @abstractmethod
    def heartbeat_tick(self, now: float) -> Sequence[object]:
        """The heartbeat thread's round: what is due now."""

    @abstractmethod
    def heartbeat_delay(self, now: float) -> float:
        """Milliseconds until :meth:`heartbeat_tick` may have something to do."""

    def poll(self, now: float) -> None:
        """The user called ``poll``: resets the max-poll-interval timer."""
        self.last_poll = now

    # ---- the coordinator -------------------------------------------------------------------

    def coordinator_found(self, node: int, now: float) -> None:
        self.tracker.found(node)
        self.last_heartbeat_ok = now
        self._log(f"coordinator {node}")

    def coordinator_lookup_failed(self, code: int, now: float,
                                  reason: str = "") -> list[RaiseError]:
        """FindCoordinator failed with ``code``: look again after a backoff, or (not
        retriable) fail for good."""
        self._log(f"coordinator lookup failed: {reason or code}")
        if self.tracker.lookup_failed(code, now):
            return [self._lookup_fatal(code, reason)]
        return []

    def coordinator_dead(self, reason: str, now: float) -> None:
        """Mark the coordinator unknown (disconnect, NOT_COORDINATOR, no answer)."""
        if self.coordinator is not None:
            self._log(f"coordinator lost: {reason}")
        self.tracker.lost(now)
        self.heartbeat_in_flight = False

    @abstractmethod
    def _lookup_fatal(self, code: int, reason: str) -> RaiseError:
        """Record a FindCoordinator error that is not retriable; the error to raise."""

    def _log(self, message: str) -> None:
        self.history.append(message)
        if len(self.history) > HISTORY_LINES:
            del self.history[:HISTORY_LINES // 2]
