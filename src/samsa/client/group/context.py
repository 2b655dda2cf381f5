"""What the parts of a group driver share: the member's machine behind its lock, and its I/O.

:class:`MemberContext` holds one :class:`~samsa.client.group.machine.MemberMachine` (of any
protocol) and the lock that guards it, the clock, the network, the metadata and the
subscription. The driver's parts (:mod:`~samsa.client.group.discovery`,
:mod:`~samsa.client.group.heartbeat`, :mod:`~samsa.client.group.commits` and the
protocol's own) change the machine only through its methods, under
:attr:`MemberContext.lock`, and never hold the lock while they wait on the network or run
user callbacks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from samsa.client.clock import Clock
from samsa.client.errors import KafkaTimeoutError, WakeupError, error_for
from samsa.client.future import Future
from samsa.client.group.machine import GroupConfig, MemberMachine
from samsa.client.metadata import Metadata
from samsa.client.subscription import SubscriptionState

__all__ = ["LEAVE_TIMEOUT_S", "MemberContext", "MemberStatus"]

T = TypeVar("T")
M = TypeVar("M", bound=MemberMachine[Any])

LEAVE_TIMEOUT_S = 5.0
"""How long a user-thread leave (close, unsubscribe) waits for its answer."""


@dataclass(frozen=True)
class MemberStatus:
    """A consistent snapshot of the member, for tools, logs and tests."""

    state: str
    member_id: str
    generation: int
    rejoin_pending: bool
    coordinator: int | None
    """The coordinator's node id; None while it is being looked up."""
    heartbeat_in_flight: bool
    since_heartbeat_ok_ms: float
    """Milliseconds since the last successful heartbeat (or the join that started it)."""
    heartbeat_thread_alive: bool
    history: tuple[str, ...]
    """The machine's recent log lines, oldest first."""


class MemberContext(Generic[M]):
    """The machine, its lock, and the I/O every part of the driver uses."""

    def __init__(self, machine: M, metadata: Metadata, subs: SubscriptionState, *,
                 client_id: str, clock: Clock, wakeup_flag: Callable[[], bool]) -> None:
        self.machine = machine
        self.metadata = metadata
        self.net = metadata.net
        self.subs = subs
        self.client_id = client_id
        self.clock = clock
        """Every deadline the driver is given is in seconds on this clock."""
        self.lock = threading.RLock()
        self._woken = wakeup_flag
        self.machine.poll(self.now_ms())  # the max-poll-interval clock starts now

    @property
    def config(self) -> GroupConfig:
        """What every protocol's config holds (the protocol's parts read
        ``machine.config``)."""
        config: GroupConfig = self.machine.config
        return config

    @property
    def group_id(self) -> str:
        return self.config.group_id

    def now_ms(self) -> float:
        """The machine's time: milliseconds on :attr:`clock`."""
        return self.clock.now() * 1000.0

    def coordinator_dest(self) -> tuple[str, int | None]:
        """The network destination of the coordinator connection."""
        return ("coordinator", self.machine.coordinator)

    def coordinator_dead(self, reason: str) -> None:
        """Mark the coordinator unknown (the next step looks it up again)."""
        with self.lock:
            self.machine.coordinator_dead(reason, self.now_ms())

    def check_wakeup(self) -> None:
        """Raise :class:`WakeupError` if ``Consumer.wakeup()`` was called."""
        if self._woken():
            raise WakeupError("wakeup() called")

    def raise_fatal(self) -> None:
        """Raise the machine's fatal error, if it has one."""
        fatal = self.machine.fatal
        if fatal is not None:
            raise error_for(fatal.code, fatal.message)  # FencedInstanceIdError for fenced

    def result(self, fut: Future[T], seconds: float) -> T:
        """Wait up to ``seconds`` on the clock for ``fut``: its value, its failure, or
        :class:`KafkaTimeoutError`."""
        if not self.clock.wait(fut, seconds):
            raise KafkaTimeoutError(f"no result within {seconds:.1f}s")
        return fut.result(0)

    def status(self, heartbeat_thread_alive: bool) -> MemberStatus:
        """A consistent snapshot of the member."""
        with self.lock:
            machine = self.machine
            return MemberStatus(
                state=machine.state.value, member_id=machine.member_id,
                generation=machine.generation, rejoin_pending=machine.needs_rejoin(),
                coordinator=machine.coordinator,
                heartbeat_in_flight=machine.heartbeat_in_flight,
                since_heartbeat_ok_ms=self.now_ms() - machine.last_heartbeat_ok,
                heartbeat_thread_alive=heartbeat_thread_alive,
                history=tuple(machine.history))
