"""The base of the members of groups that assign through member epochs (KIP-848).

A member of a consumer group (KIP-848), and of a share group (KIP-932), speaks one
heartbeat API: the coordinator computes the assignment and sends
each member its target in a heartbeat answer; the member reconciles towards it and
acknowledges with its next heartbeat. :class:`EpochMembership` is that lifecycle, pure (no
sockets, no clock, every event carries ``now`` in milliseconds), as Kafka's
``AbstractMembershipManager``. A protocol is a subclass that builds its heartbeat request:
:class:`~samsa.client.group.consumer_machine.ConsumerMembership` (ConsumerGroupHeartbeat,
OffsetCommit v9 identity, static members) and
:class:`~samsa.client.group.share_machine.ShareMembership` (ShareGroupHeartbeat).

Member states (Kafka's ``MemberState``): UNSUBSCRIBED -> JOINING (epoch 0) -> RECONCILING
(a new target assignment) -> ACKNOWLEDGING (reconciled: the next heartbeat tells the
coordinator) -> STABLE. FENCED (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): partitions lost,
then JOINING again at epoch 0 with the same member id. PREPARE_LEAVING (the listener
releases the partitions) -> LEAVING (epoch -1, static -2) -> UNSUBSCRIBED. STALE: the poll
timer expired, the member left and rejoins on the next poll. FATAL: raised to the user.

The actions it returns:

* :class:`SendEpochHeartbeat` (the protocol's subclass): send its request; the answer
  comes back through :meth:`EpochMembership.on_heartbeat_response` (or
  ``on_heartbeat_failed``);
* :class:`~samsa.client.group.actions.FindCoordinator`: look the coordinator up;
* :class:`Reconcile`: on the user's thread, auto-commit (when ``commit``), call
  ``on_partitions_revoked`` for ``revoked``, take ``assignment`` and call
  ``on_partitions_assigned`` for ``added``, then :meth:`EpochMembership.reconciled`;
* :class:`~samsa.client.group.actions.RevokePartitions` /
  :class:`~samsa.client.group.actions.LosePartitions`: release the assignment (leaving,
  fenced, stale, fatal), then :meth:`EpochMembership.released`;
* :class:`~samsa.client.group.actions.RaiseError`: a fatal error for the user (or, for a
  heartbeat's TOPIC_AUTHORIZATION_FAILED, an error for the next ``poll`` only: the member
  stays, as in Kafka 4.x).
"""

from __future__ import annotations

import enum
from abc import abstractmethod
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar
from uuid import UUID

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.group.actions import (
    FindCoordinator,
    LosePartitions,
    RaiseError,
    RevokePartitions,
)
from samsa.client.group.machine import GroupConfig, MemberMachine

__all__ = [
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "NO_ASSIGNMENT",
    "STATIC_LEAVE_EPOCH",
    "EpochAction",
    "EpochConfig",
    "EpochMembership",
    "EpochRequest",
    "EpochState",
    "LocalAssignment",
    "Reconcile",
    "SendEpochHeartbeat",
]

JOIN_EPOCH = 0
"""The member epoch of a (re)join."""
LEAVE_EPOCH = -1
"""The member epoch of a dynamic member's leave."""
STATIC_LEAVE_EPOCH = -2
"""The member epoch of a static member's leave: the group keeps its assignment for the
session timeout, for the same ``group_instance_id`` to take back."""

RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress})
COORDINATOR_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
FENCING = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})


class EpochState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    STALE = "STALE"
    FATAL = "FATAL"


NOT_IN_GROUP = frozenset({EpochState.UNSUBSCRIBED, EpochState.FENCED, EpochState.FATAL,
                          EpochState.STALE})
TAKES_ASSIGNMENTS = frozenset({EpochState.JOINING, EpochState.RECONCILING,
                               EpochState.ACKNOWLEDGING, EpochState.STABLE})


class EpochConfig(GroupConfig, Protocol):
    """What every epoch protocol's member config holds."""

    @property
    def member_id(self) -> str: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def retry_backoff_max_ms(self) -> int: ...


class EpochRequest(Protocol):
    """What the base reads of a protocol's heartbeat request."""

    @property
    def member_epoch(self) -> int: ...
    @property
    def leaving(self) -> bool: ...


EC = TypeVar("EC", bound=EpochConfig)
R = TypeVar("R", bound=EpochRequest)


@dataclass(frozen=True)
class LocalAssignment:
    """Partitions by topic id, with a local epoch bumped whenever they change (so that an
    assignment reconciled twice is acknowledged twice)."""

    epoch: int
    partitions: frozenset[tuple[UUID, int]]

    def by_topic(self) -> tuple[tuple[UUID, tuple[int, ...]], ...]:
        topics: dict[UUID, list[int]] = {}
        for tid, p in sorted(self.partitions):
            topics.setdefault(tid, []).append(p)
        return tuple((tid, tuple(ps)) for tid, ps in topics.items())


NO_ASSIGNMENT = LocalAssignment(-1, frozenset())


@dataclass(frozen=True)
class Reconcile:
    """Move to ``assignment``: revoke first, then assign (see the module docstring)."""

    revoked: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    assignment: frozenset[TopicPartition]
    local: LocalAssignment
    attempt: int
    commit: bool


@dataclass(frozen=True)
class SendEpochHeartbeat(Generic[R]):
    """Send the protocol's heartbeat ``request`` (each protocol names its subclass)."""

    request: R


EpochAction = FindCoordinator | Reconcile | RevokePartitions | LosePartitions | RaiseError


@dataclass
class EpochMembership(MemberMachine[EC], Generic[EC, R]):
    """State of one member; all times are milliseconds from the caller."""

    state: EpochState = EpochState.UNSUBSCRIBED
    member_epoch: int = JOIN_EPOCH
    topics: tuple[str, ...] = ()
    regex: str | None = None
    subscription_updated: bool = False
    target: LocalAssignment = NO_ASSIGNMENT
    current: LocalAssignment = NO_ASSIGNMENT
    topic_names: dict[UUID, str] = field(default_factory=dict)
    """Names of the topics of the current assignment (they may leave the metadata first)."""
    heartbeat_interval_ms: float = 0.0
    backoff_until: float = 0.0
    failures: int = 0
    reconciling: int | None = None
    """The attempt of the reconciliation the user thread runs, if any."""
    attempts: int = 0
    release_pending: bool = False
    """FENCED, STALE or FATAL: the user thread must report the partitions lost."""
    error: RaiseError | None = None
    """An error for the next ``poll`` only (a heartbeat's TOPIC_AUTHORIZATION_FAILED): the
    member keeps its state and heartbeats on, as Kafka's does."""

    API_NAME: ClassVar[str]
    """The protocol's heartbeat API (for error messages)."""
    FATAL_HINTS: ClassVar[Mapping[int, str]] = {}
    """What a fatal error code means for this protocol's user."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.member_id = self.member_id or self.config.member_id

    # ---- queries -----------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The member epoch (what commits carry)."""
        return self.member_epoch

    @property
    def leave_epoch(self) -> int:
        return STATIC_LEAVE_EPOCH if self.is_static else LEAVE_EPOCH

    def in_group(self) -> bool:
        return self.state not in NOT_IN_GROUP

    def needs_rejoin(self) -> bool:
        """True until the member has reconciled and acknowledged its assignment."""
        return self.state != EpochState.STABLE

    def unresolved(self, names: Mapping[UUID, str]) -> frozenset[UUID]:
        """Topic ids of the target assignment with no known name (metadata is behind)."""
        if self.state != EpochState.RECONCILING:
            return frozenset()
        return frozenset(tid for tid, _ in self.target.partitions
                         if tid not in names and tid not in self.topic_names)

    # ---- the user's thread ---------------------------------------------------------------

    def subscribe(self, topics: Set[str], regex: str | None) -> None:
        """The subscription changed; a member outside the group joins on the next poll,
        a member in it sends the change with its next heartbeat."""
        self.topics = tuple(sorted(topics)) if regex is None else ()
        self.regex = regex
        self.subscription_updated = True

    def poll(self, now: float) -> None:
        """The user called ``poll``: resets the poll timer; joins after ``subscribe``."""
        super().poll(now)
        if self.subscription_updated and self.state == EpochState.UNSUBSCRIBED:
            self.subscription_updated = False
            self._to_joining("subscribed")
        elif self.state == EpochState.UNSUBSCRIBED:
            self.subscription_updated = False

    def user_step(self, now: float, names: Mapping[UUID, str],
                  owned: Set[TopicPartition]) -> list[EpochAction]:
        """What the user thread does next: release lost partitions, raise a fatal error,
        or reconcile a new target assignment. ``names``: topic id -> name from metadata;
        ``owned``: the partitions the consumer holds."""
        if self.release_pending:
            self.release_pending = False
            return [LosePartitions(frozenset(owned))]
        if self.fatal is not None:
            return [self.fatal]
        if self.error is not None:
            error, self.error = self.error, None
            return [error]
        if self.state != EpochState.RECONCILING or self.reconciling is not None or \
                self.target == self.current:
            return []
        resolved = frozenset((tid, p) for tid, p in self.target.partitions
                             if tid in names or tid in self.topic_names)
        local = LocalAssignment(self.target.epoch, resolved)
        if self.current != NO_ASSIGNMENT and resolved == self.current.partitions:
            # Only topics unknown to metadata are new: acknowledge what is resolved.
            self.current = local
            self._to(EpochState.ACKNOWLEDGING)
            return []
        for tid, _ in resolved:
            if tid in names:
                self.topic_names[tid] = names[tid]
        assignment = frozenset(TopicPartition(self.topic_names[tid], p) for tid, p in resolved)
        self.attempts += 1
        self.reconciling = self.attempts
        plan = Reconcile(revoked=frozenset(owned - assignment),
                         added=frozenset(assignment - owned), assignment=assignment,
                         local=local, attempt=self.attempts, commit=self.auto_commit)
        self._log(f"reconcile epoch {self.member_epoch}: -{len(plan.revoked)} "
                  f"+{len(plan.added)} = {len(assignment)} partitions")
        return [plan]

    def reconcile_valid(self, plan: Reconcile) -> bool:
        """False once the reconciliation is moot (fenced, leaving, rejoined meanwhile)."""
        return self.state == EpochState.RECONCILING and self.reconciling == plan.attempt

    def reconciled(self, plan: Reconcile, now: float, ok: bool = True) -> None:
        """The user thread finished ``plan`` (``ok``: its listener calls did not raise)."""
        if self.reconciling != plan.attempt:
            return
        self.reconciling = None
        if not ok or self.state != EpochState.RECONCILING:
            return  # stays RECONCILING: the next poll tries again, without an ack
        self.current = plan.local
        names = {tp.topic for tp in plan.assignment}
        self.topic_names = {t: n for t, n in self.topic_names.items() if n in names}
        self._to(EpochState.ACKNOWLEDGING)

    def released(self, now: float) -> None:
        """The user thread released the partitions (lost or revoked)."""
        if self.state in (EpochState.FENCED, EpochState.STALE):
            self.current = NO_ASSIGNMENT
            self._to_joining("rejoin after releasing the partitions")

    def prepare_leave(self, owned: Set[TopicPartition]) -> list[EpochAction]:
        """``unsubscribe``/``close``: release the partitions (revoked while in the group,
        lost otherwise), then :meth:`leave_request`."""
        if self.state in NOT_IN_GROUP:
            lost: list[EpochAction] = []
            if self.state in (EpochState.FENCED, EpochState.STALE):
                if self.release_pending and owned:
                    lost.append(LosePartitions(frozenset(owned)))
                self.release_pending = False
                self.current = self.target = NO_ASSIGNMENT
                self._to(EpochState.UNSUBSCRIBED)
            self._clear_subscription()
            return lost
        if self.state in (EpochState.PREPARE_LEAVING, EpochState.LEAVING):
            return []
        self._to(EpochState.PREPARE_LEAVING)
        if not owned:
            return []
        if self.member_epoch > 0:
            return [RevokePartitions(frozenset(owned))]
        return [LosePartitions(frozenset(owned))]

    def leave_request(self, now: float) -> R | None:
        """After :meth:`prepare_leave`: the heartbeat that leaves (None if the member was
        fenced meanwhile or has no coordinator). The member is UNSUBSCRIBED after it."""
        if self.state != EpochState.PREPARE_LEAVING:
            return None
        self._clear_subscription()
        self.member_epoch = self.leave_epoch
        self.current = self.target = NO_ASSIGNMENT
        self.reconciling = None
        self._to(EpochState.LEAVING)
        request = self._build_request() if self.coordinator is not None else None
        self._to(EpochState.UNSUBSCRIBED)
        self._forget_sent()
        return request

    # ---- the heartbeat thread ------------------------------------------------------------

    def heartbeat_tick(self, now: float) -> list[object]:
        """A heartbeat if one is due; a FindCoordinator; the leave of an expired poll timer."""
        if self.state in NOT_IN_GROUP:
            return []
        if self.coordinator is None:
            return [FindCoordinator()] if now >= self.retry_at else []
        if now - self.last_poll > self.config.rebalance_timeout_ms and \
                self.state not in (EpochState.PREPARE_LEAVING, EpochState.LEAVING):
            return self._poll_timeout(now)
        if self.heartbeat_in_flight or now < self.backoff_until:
            return []
        if now < self.next_heartbeat and not self._heartbeat_now():
            return []
        request = self._build_request()
        self.heartbeat_in_flight = True
        self.next_heartbeat = now + self.heartbeat_interval_ms
        if self.state == EpochState.ACKNOWLEDGING:
            self._to(EpochState.STABLE if self.target == self.current else EpochState.RECONCILING)
        return [self._heartbeat(request)]

    def heartbeat_delay(self, now: float) -> float:
        """Milliseconds until :meth:`heartbeat_tick` may have something to do."""
        if self.state in NOT_IN_GROUP or self.coordinator is None:
            return self.config.retry_backoff_ms
        until_poll = self.last_poll + self.config.rebalance_timeout_ms - now
        if self.heartbeat_in_flight:
            return max(0.0, min(until_poll, self.config.retry_backoff_ms))
        due = self.backoff_until if self._heartbeat_now() else \
            max(self.next_heartbeat, self.backoff_until)
        return max(0.0, min(due - now, until_poll))

    def _heartbeat_now(self) -> bool:
        return self.state in (EpochState.JOINING, EpochState.ACKNOWLEDGING, EpochState.LEAVING)

    def _poll_timeout(self, now: float) -> list[object]:
        """Kafka: the member leaves (epoch -1, static -2) and is STALE until the next poll,
        which reports its partitions lost and joins again."""
        self._log("max_poll_interval_ms exceeded: leaving the group")
        self.member_epoch = self.leave_epoch
        self.current = self.target = NO_ASSIGNMENT
        self.reconciling = None
        self._to(EpochState.LEAVING)
        request = self._build_request()
        self._to(EpochState.STALE)
        self.release_pending = True
        self._forget_sent()
        self.heartbeat_in_flight = False
        self.next_heartbeat = self.backoff_until = now
        return [self._heartbeat(request)]

    def on_heartbeat_response(self, request: R, now: float, code: int, *,
                              message: str | None = None, member_id: str | None = None,
                              member_epoch: int = 0, heartbeat_interval_ms: int = 0,
                              assignment: Mapping[UUID, Set[int]] | None = None
                              ) -> list[EpochAction]:
        """The coordinator answered ``request``."""
        if request.leaving:
            return []  # a leave's answer changes nothing (Kafka only logs it)
        self.heartbeat_in_flight = False
        if code == ErrorCode.none:
            return self._on_success(now, member_id, member_epoch, heartbeat_interval_ms,
                                    assignment)
        self._forget_sent()  # the next heartbeat is a full one
        self.failures += 1
        self.next_heartbeat = now
        self.backoff_until = now + self._backoff()
        what = f"heartbeat error {code}{f': {message}' if message else ''}"
        self._log(what)
        if code in COORDINATOR_MOVED:
            self.coordinator_dead(what, now)
            self.backoff_until = now
            return []
        if code in RETRIABLE:
            return []
        if code in FENCING:
            self._fenced(what)
            self.backoff_until = now
            return []
        if code == ErrorCode.topic_authorization_failed:
            # Not fatal (Kafka 4.x): the next poll raises it; the member stays and heartbeats
            # on after the backoff, and recovers once the ACLs or its subscription change.
            self.error = RaiseError(int(code), f"{self.API_NAME} failed with error {code}"
                                    + (f": {message}" if message else ""))
            return []
        return [self._fail(code, message)]

    def on_heartbeat_failed(self, request: R, reason: str, now: float) -> None:
        """No answer (disconnect, timeout): find the coordinator again, then a full
        heartbeat after a backoff."""
        if request.leaving:
            return
        self.heartbeat_in_flight = False
        self._forget_sent()
        self.failures += 1
        self.next_heartbeat = now
        self.backoff_until = now + self._backoff()
        self.coordinator_dead(f"heartbeat failed: {reason}", now)

    def _on_success(self, now: float, member_id: str | None, epoch: int, interval: int,
                    assignment: Mapping[UUID, Set[int]] | None) -> list[EpochAction]:
        self.failures = 0
        self.backoff_until = 0.0
        self.last_heartbeat_ok = now
        if interval > 0 and interval != self.heartbeat_interval_ms:
            self.heartbeat_interval_ms = interval
            self.next_heartbeat = now + interval
        if self.state in NOT_IN_GROUP or self.state == EpochState.LEAVING or epoch < 0:
            return []
        if member_id:
            self.member_id = member_id  # v0: the coordinator names the member
        if epoch != self.member_epoch:
            self._log(f"member epoch {self.member_epoch} -> {epoch}")
        self.member_epoch = epoch
        if assignment is None or self.state not in TAKES_ASSIGNMENTS:
            return []
        target = frozenset((tid, int(p)) for tid, ps in assignment.items() for p in ps)
        if self.target == NO_ASSIGNMENT or target != self.target.partitions:
            self.target = LocalAssignment(self.target.epoch + 1, target)
        if self.target != self.current:
            self._to(EpochState.RECONCILING)
        elif self.state in (EpochState.RECONCILING, EpochState.JOINING) and \
                self.reconciling is None:
            self._to(EpochState.STABLE)  # (while reconciling, its ack comes first)
        return []

    # ---- transitions -----------------------------------------------------------------------

    def _fenced(self, why: str) -> None:
        if self.state in (EpochState.PREPARE_LEAVING, EpochState.LEAVING):
            # Out of the group already: no leave to send (Kafka's transitionToFenced).
            self.member_epoch = self.leave_epoch
            self.current = self.target = NO_ASSIGNMENT
            self.reconciling = None
            self._to(EpochState.UNSUBSCRIBED)
            return
        if self.state == EpochState.UNSUBSCRIBED:
            return
        self._log(f"fenced ({why}): partitions lost, rejoining at epoch 0")
        self.member_epoch = JOIN_EPOCH
        self.reconciling = None
        self._to(EpochState.FENCED)
        self.release_pending = True

    def _to_joining(self, why: str) -> None:
        if self.state == EpochState.FATAL:
            return
        self.member_epoch = JOIN_EPOCH
        self.target = NO_ASSIGNMENT
        self.topic_names.clear()
        self.reconciling = None
        self._forget_sent()
        self.next_heartbeat = 0.0
        self._log(f"join as {self.member_id}: {why}")
        self._to(EpochState.JOINING)

    def _fail(self, code: int, message: str | None) -> RaiseError:
        """FATAL with ``code``: the error every later ``poll`` raises."""
        previous = self.state
        hint = self.FATAL_HINTS.get(int(code), "")
        text = "; ".join(s for s in (f"{self.API_NAME} failed with error {code}",
                                     message or "", hint) if s)
        self.fatal = RaiseError(int(code), text)
        self._to(EpochState.FATAL)
        self.reconciling = None
        self.release_pending = previous not in (EpochState.UNSUBSCRIBED, EpochState.LEAVING,
                                                EpochState.PREPARE_LEAVING)
        return self.fatal

    def _clear_subscription(self) -> None:
        self.topics = ()
        self.regex = None
        self.subscription_updated = False

    def _to(self, state: EpochState) -> None:
        if state != self.state:
            self._log(f"{self.state.value} -> {state.value}")
            self.state = state

    def _backoff(self) -> float:
        cfg = self.config
        return float(min(cfg.retry_backoff_ms * 2 ** max(0, self.failures - 1),
                         max(cfg.retry_backoff_ms, cfg.retry_backoff_max_ms)))

    def _lookup_fatal(self, code: int, reason: str) -> RaiseError:
        return self._fail(code, f"FindCoordinator: {reason}")

    # ---- what a protocol provides ------------------------------------------------------------

    @abstractmethod
    def _build_request(self) -> R:
        """The next heartbeat request of this member (what it sends depends on the
        protocol: all fields when joining or after an error, else what changed)."""

    @abstractmethod
    def _heartbeat(self, request: R) -> SendEpochHeartbeat[R]:
        """The action that sends ``request``."""

    @abstractmethod
    def _forget_sent(self) -> None:
        """After an error, a leave or a join: the next request carries every field."""
