"""What the parts of a consumer's group driver share: the state machine behind its lock.

:class:`MemberContext` holds one :class:`~samsa.client.membership.Membership` and the lock
that guards it, the clock, the network and the subscription. The driver's parts
(:mod:`~samsa.client.discovery`, :mod:`~samsa.client.rebalance`,
:mod:`~samsa.client.heartbeat`, :mod:`~samsa.client.commits`) change the machine only
through its methods, under :attr:`MemberContext.lock`, and never hold the lock while they
wait on the network or run user callbacks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from samsa.client.clock import Clock
from samsa.client.errors import KafkaTimeoutError, WakeupError, error_for
from samsa.client.future import Future
from samsa.client.membership import Membership, MembershipConfig, RaiseError, SendLeaveGroup
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey, NetworkClient
from samsa.client.subscription import SubscriptionState

__all__ = ["GroupContext", "GroupMachine", "MemberContext", "MemberStatus"]

T = TypeVar("T")

LEAVE_TIMEOUT_S = 5.0
"""How long a user-thread LeaveGroup (close, unsubscribe) waits for its answer."""


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


class GroupMachine(Protocol):
    """What discovery and commits use of a member's machine: the classic
    :class:`~samsa.client.membership.Membership` or the consumer protocol's
    :class:`~samsa.client.consumer_membership.ConsumerMembership`."""

    @property
    def coordinator(self) -> int | None: ...
    @property
    def retry_at(self) -> float: ...
    @property
    def fatal(self) -> RaiseError | None: ...
    def coordinator_found(self, node: int, now: float) -> None: ...
    def coordinator_lookup_failed(self, code: int, now: float,
                                  reason: str = "") -> Sequence[object]: ...
    def coordinator_dead(self, reason: str, now: float) -> None: ...
    def commit_identity(self) -> tuple[int, str] | None: ...
    def on_commit_error(self, code: int, now: float, generation: int) -> Sequence[object]: ...


class GroupConfig(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...
    @property
    def retry_backoff_ms(self) -> int: ...


class GroupContext(Protocol):
    """What discovery and commits use of a member's context (:class:`MemberContext` or the
    consumer protocol's)."""

    @property
    def machine(self) -> GroupMachine: ...
    @property
    def config(self) -> GroupConfig: ...
    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def metadata(self) -> Metadata: ...
    @property
    def net(self) -> NetworkClient: ...
    @property
    def subs(self) -> SubscriptionState: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def group_id(self) -> str: ...
    def now_ms(self) -> float: ...
    def coordinator_dest(self) -> tuple[str, int | None]: ...
    def coordinator_dead(self, reason: str) -> None: ...
    def check_wakeup(self) -> None: ...
    def raise_fatal(self) -> None: ...
    def result(self, fut: Future[T], seconds: float) -> T: ...


class MemberContext:
    """The machine, its lock, and the I/O every part of the driver uses."""

    def __init__(self, metadata: Metadata, subs: SubscriptionState, config: MembershipConfig,
                 *, client_id: str, auto_commit: bool, clock: Clock,
                 wakeup_flag: Callable[[], bool]) -> None:
        self.metadata = metadata
        self.net = metadata.net
        self.subs = subs
        self.config = config
        self.client_id = client_id
        self.clock = clock
        """Every deadline the driver is given is in seconds on this clock."""
        self.machine = Membership(config, auto_commit=auto_commit)
        self.lock = threading.RLock()
        self._woken = wakeup_flag
        self.machine.poll(self.now_ms())  # the max-poll-interval clock starts now

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

    def send_leave(self, action: SendLeaveGroup, wait: bool) -> None:
        """Send LeaveGroup; ``wait``: block (up to :data:`LEAVE_TIMEOUT_S`) for the answer.

        The heartbeat thread does not wait: a coordinator slow to answer must not stop it.
        """
        if self.machine.coordinator is None:
            return
        body = {"group_id": self.group_id, "member_id": action.member_id,
                "members": [{"member_id": action.member_id,
                             "group_instance_id": self.config.group_instance_id,
                             "reason": action.reason}]}
        fut = self.net.send(self.coordinator_dest(), ApiKey.LEAVE_GROUP, body,
                            timeout_ms=LEAVE_TIMEOUT_S * 1000)
        if wait:
            self.clock.wait(fut, LEAVE_TIMEOUT_S)
