"""A member of a classic group (JoinGroup/SyncGroup/Heartbeat) as a pure state machine.

A :class:`~samsa.client.group.machine.MemberMachine`; the consumer protocol's sibling is
:mod:`~samsa.client.group.consumer_machine`. The driver
(:mod:`~samsa.client.group.classic_driver`) feeds it events with the current time in
milliseconds and performs the actions it returns, in order:

* :class:`~samsa.client.group.actions.FindCoordinator`, :class:`SendJoinGroup`,
  :class:`SendSyncGroup`, :class:`SendHeartbeat`, :class:`SendLeaveGroup`: requests to
  send; their responses come back as ``on_*`` events.
* :class:`PerformAssignment`: this member leads the generation; run the voted assignor and
  call :meth:`Membership.on_assignment_computed`.
* :class:`CommitOffsets`, :class:`~samsa.client.group.actions.RevokePartitions`,
  :class:`AssignPartitions`, :class:`~samsa.client.group.actions.LosePartitions`:
  auto-commit and rebalance listener calls on the user's thread.
* :class:`~samsa.client.group.actions.RaiseError`: a fatal error for the user (fenced static
  member, bad config).

Member states follow Kafka's client: UNJOINED -> REBALANCING (JoinGroup/SyncGroup in
flight) -> STABLE (heartbeating); any failure goes back to UNJOINED with a rejoin pending.
Eager members revoke everything before they join; cooperative members revoke only what the
new assignment takes away, then rejoin (KIP-429).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.group.actions import (
    NO_GENERATION,
    NO_MEMBER_ID,
    FindCoordinator,
    LosePartitions,
    RaiseError,
    RevokePartitions,
)
from samsa.client.group.machine import MemberMachine

__all__ = [
    "PROTOCOL_TYPE",
    "Action",
    "AssignPartitions",
    "CommitOffsets",
    "JoinedMember",
    "MemberState",
    "Membership",
    "MembershipConfig",
    "PerformAssignment",
    "SendHeartbeat",
    "SendJoinGroup",
    "SendLeaveGroup",
    "SendSyncGroup",
]

PROTOCOL_TYPE = "consumer"
"""The protocol type of consumer groups in JoinGroup and SyncGroup."""

COORDINATOR_ERRORS = frozenset({ErrorCode.request_timed_out, ErrorCode.network_exception,
                                ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
"""Errors after which the coordinator is rediscovered (network_exception = disconnect)."""


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    REBALANCING = "REBALANCING"
    STABLE = "STABLE"


@dataclass(frozen=True)
class MembershipConfig:
    group_id: str
    group_instance_id: str | None = None
    session_timeout_ms: int = 45000
    rebalance_timeout_ms: int = 300000
    """``max_poll_interval_ms``: also the poll timeout that makes the member leave."""
    heartbeat_interval_ms: int = 3000
    retry_backoff_ms: int = 100
    cooperative: bool = False
    assignors: tuple[str, ...] = ()
    """The protocol names the member offers in JoinGroup (its assignors); the coordinator
    must choose one of them (empty: not checked)."""

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be "
                             f"lower than session_timeout_ms ({self.session_timeout_ms})")


@dataclass(frozen=True)
class JoinedMember:
    """One member of the JoinGroup response (leader only)."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


# ---- actions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendJoinGroup:
    member_id: str
    reason: str


@dataclass(frozen=True)
class PerformAssignment:
    generation: int
    protocol: str
    leader_id: str
    members: tuple[JoinedMember, ...]


@dataclass(frozen=True)
class SendSyncGroup:
    generation: int
    member_id: str
    protocol: str
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class SendHeartbeat:
    generation: int
    member_id: str


@dataclass(frozen=True)
class SendLeaveGroup:
    member_id: str
    reason: str


@dataclass(frozen=True)
class CommitOffsets:
    """Commit consumed positions synchronously (auto-commit before a revocation)."""

    generation: int
    member_id: str


@dataclass(frozen=True)
class AssignPartitions:
    added: frozenset[TopicPartition]
    assignment: frozenset[TopicPartition]


Action = (FindCoordinator | SendJoinGroup | PerformAssignment | SendSyncGroup | SendHeartbeat
          | SendLeaveGroup | CommitOffsets | RevokePartitions | AssignPartitions
          | LosePartitions | RaiseError)


@dataclass
class Membership(MemberMachine[MembershipConfig]):
    """State of one consumer in its classic group; all times are milliseconds from the
    caller."""

    state: MemberState = MemberState.UNJOINED
    generation: int = NO_GENERATION
    protocol: str | None = None
    leader_id: str | None = None
    owned: frozenset[TopicPartition] = frozenset()
    rejoin_needed: bool = True
    rejoin_reason: str = "initial join"
    needs_join_prepare: bool = True
    awaiting: str = ""
    """While REBALANCING: "join" (JoinGroup in flight), "assignment" (the leader computes
    it) or "sync" (SyncGroup in flight)."""

    # ---- queries ---------------------------------------------------------------------

    def needs_rejoin(self) -> bool:
        """True while the member must (re)join before it may fetch with its assignment."""
        return self.rejoin_needed or self.state != MemberState.STABLE

    def commit_identity(self) -> tuple[int, str] | None:
        """(generation, member id) for OffsetCommit; (NO_GENERATION, NO_MEMBER_ID) without a
        generation.

        The generation stays valid until the JoinGroup is sent: the commits before a join
        (Kafka's ``onJoinPrepare``) carry it. None from then until the SyncGroup answer
        (Kafka's ``generationIfStable``: RebalanceInProgressException): a commit would
        queue behind the JoinGroup the coordinator parks on the same connection, then find
        the generation gone; the new generation takes no commits before its SyncGroup.
        """
        if self.generation < 0:
            return NO_GENERATION, NO_MEMBER_ID
        if self.state == MemberState.REBALANCING:
            return None
        return self.generation, self.member_id

    def awaits(self, request: SendJoinGroup | SendSyncGroup) -> bool:
        """True while the answer to ``request`` (sent earlier, not answered yet) still
        decides what comes next: the join loop then resumes waiting for it instead of
        asking for a new step. False once the member left that rebalance (poll timeout,
        leave, an error from another request)."""
        if self.state != MemberState.REBALANCING:
            return False
        if isinstance(request, SendJoinGroup):
            return self.awaiting == "join" and request.member_id == self.member_id
        return self.awaiting == "sync" and request.generation == self.generation

    def heartbeating(self) -> bool:
        """True while the member heartbeats: stable, or leading the group and computing the
        assignment (which may take longer than the session timeout).

        Not while a SyncGroup is in flight: the coordinator spares members parked in a sync,
        and the coordinator answers a connection's requests in order, so a heartbeat behind
        the parked SyncGroup would only time out (and its timeout closes the connection).
        """
        return self.state == MemberState.STABLE or (
            self.state == MemberState.REBALANCING and self.awaiting == "assignment")

    # ---- user thread: poll and join ----------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        """Metadata or subscription changed, or a cooperative revocation finished."""
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def next_step(self, now: float,
                  unsubscribed: frozenset[TopicPartition] = frozenset()) -> list[Action]:
        """What the join loop does next (empty: wait for a response or the backoff).

        Before a join, the commit and revocation actions come alone, while the member is
        still in its generation (and heartbeating); the next call sends the JoinGroup.
        ``unsubscribed``: owned partitions of topics the member no longer subscribes to (a
        cooperative member revokes those before it joins; an eager one revokes all).
        """
        if self.fatal is not None:
            return [self.fatal]
        if not self.needs_rejoin() or self.state == MemberState.REBALANCING:
            return []
        if now < self.retry_at:
            return []
        if self.coordinator is None:
            return [FindCoordinator()]
        if self.needs_join_prepare:
            self.needs_join_prepare = False
            prepare = self._prepare_join(unsubscribed & self.owned)
            if prepare:
                return prepare
        self.state = MemberState.REBALANCING
        self.awaiting = "join"
        self.rejoin_needed = False
        self.heartbeat_in_flight = False
        self._log(f"join as {self.member_id or '<new>'}: {self.rejoin_reason}")
        return [SendJoinGroup(self.member_id, self.rejoin_reason)]

    def _prepare_join(self, unsubscribed: frozenset[TopicPartition]) -> list[Action]:
        actions: list[Action] = []
        if self.generation < 0:
            # Generation lost (poll timeout, unknown member, illegal generation): the
            # partitions may already belong to others; no commit, "lost" not "revoked".
            if self.owned:
                actions.append(LosePartitions(self.owned))
                self.owned = frozenset()
            return actions
        if self.auto_commit:
            actions.append(CommitOffsets(self.generation, self.member_id))
        if not self.config.cooperative and self.owned:
            actions.append(RevokePartitions(self.owned))
            self.owned = frozenset()
        elif unsubscribed:
            actions.append(RevokePartitions(unsubscribed))
            self.owned -= unsubscribed
        return actions

    def _inconsistent(self, what: str, detail: str) -> list[Action]:
        """A JoinGroup/SyncGroup answer for another protocol: fatal."""
        self.state = MemberState.UNJOINED
        self.awaiting = ""
        self.rejoin_needed = True
        self._log(f"{what} answered {detail}")
        return self.fail(ErrorCode.inconsistent_group_protocol,
                         f"the coordinator's {what} answer names {detail}")

    def fail(self, code: int, message: str) -> list[Action]:
        """A fatal error found by the driver (e.g. the coordinator chose an assignor this
        member does not have): every later step raises it."""
        self.fatal = RaiseError(code, message)
        return [self.fatal]

    def abort_rebalance(self) -> None:
        """The join loop was interrupted (an exception in the driver): join again later."""
        if self.state == MemberState.REBALANCING:
            self.state = MemberState.UNJOINED
            self.awaiting = ""
            self.rejoin_needed = True

    def on_join_response(self, code: int, now: float, *, generation: int = NO_GENERATION,
                         member_id: str = NO_MEMBER_ID, protocol: str | None = None,
                         leader_id: str = "", members: tuple[JoinedMember, ...] = (),
                         skip_assignment: bool = False,
                         protocol_type: str | None = None) -> list[Action]:
        """JoinGroup answered. ``skip_assignment`` (v9+): a static leader rejoined a stable
        group without changes, so it sends an empty SyncGroup instead of assigning.

        A successful answer naming another protocol type (v7+; None: not given) or a
        protocol the member did not offer is INCONSISTENT_GROUP_PROTOCOL, raised to the
        user (Kafka's consumer checks both: the second as "invalid assignment protocol").
        """
        if self.state != MemberState.REBALANCING or self.awaiting != "join":
            return []
        if code == ErrorCode.none and protocol_type not in (None, PROTOCOL_TYPE):
            return self._inconsistent("JoinGroup", f"protocol type {protocol_type!r}, not "
                                                   f"{PROTOCOL_TYPE!r}")
        if code == ErrorCode.none and self.config.assignors and \
                protocol not in self.config.assignors:
            return self._inconsistent("JoinGroup", f"assignor {protocol!r}, which this "
                                                   f"member does not have "
                                                   f"{list(self.config.assignors)}")
        if code == ErrorCode.none:
            self.generation = generation
            self.member_id = member_id
            self.protocol = protocol
            self.leader_id = leader_id
            self._log(f"joined generation {generation} as {member_id}"
                      f"{' (leader)' if leader_id == member_id else ''}")
            if leader_id == member_id and not skip_assignment:
                # Heartbeat while assigning, in the new generation (Kafka heartbeats in
                # COMPLETING_REBALANCE): a slow assignor must not cost the leader its session.
                self.awaiting = "assignment"
                self.last_heartbeat_ok = now
                self.next_heartbeat = now + self.config.heartbeat_interval_ms
                self.heartbeat_in_flight = False
                return [PerformAssignment(generation, protocol or "", leader_id, members)]
            self.awaiting = "sync"
            return [SendSyncGroup(generation, member_id, protocol or "", ())]
        self.state = MemberState.UNJOINED
        self.awaiting = ""
        self.rejoin_needed = True
        if code == ErrorCode.member_id_required:
            self.member_id = member_id
            self.rejoin_reason = "member id required"
            return []
        return self._on_group_error(code, now, "JoinGroup")

    def on_assignment_computed(self, assignments: dict[str, bytes]) -> list[Action]:
        if self.state != MemberState.REBALANCING or self.awaiting != "assignment" or \
                self.protocol is None:
            return []  # the heartbeat thread saw the generation end meanwhile
        self.awaiting = "sync"
        return [SendSyncGroup(self.generation, self.member_id, self.protocol,
                              tuple(sorted(assignments.items())))]

    def on_sync_response(self, code: int, now: float, generation: int,
                         assignment: frozenset[TopicPartition] = frozenset(), *,
                         protocol_type: str | None = None, protocol: str | None = None,
                         subscribed: bool = True) -> list[Action]:
        """SyncGroup answered with this member's ``assignment``.

        A successful answer naming another protocol type or protocol than the join's (v5+;
        None: not given) is INCONSISTENT_GROUP_PROTOCOL, raised to the user. An assignment
        with partitions outside the subscription (``subscribed`` False: the subscription
        changed since the join) is not taken: the member stays in the generation with what
        it owned and rejoins with its current subscription, as Kafka's consumer does.
        """
        if self.state != MemberState.REBALANCING or self.awaiting != "sync" or \
                generation != self.generation:
            return []
        if code == ErrorCode.none and protocol_type not in (None, PROTOCOL_TYPE):
            return self._inconsistent("SyncGroup", f"protocol type {protocol_type!r}, not "
                                                   f"{PROTOCOL_TYPE!r}")
        if code == ErrorCode.none and protocol not in (None, self.protocol):
            return self._inconsistent("SyncGroup", f"protocol {protocol!r}, but the "
                                                   f"JoinGroup chose {self.protocol!r}")
        self.awaiting = ""
        if code != ErrorCode.none:
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True
            return self._on_group_error(code, now, "SyncGroup")
        self.state = MemberState.STABLE
        self.needs_join_prepare = True
        self.last_heartbeat_ok = now
        self.next_heartbeat = now + self.config.heartbeat_interval_ms
        self.heartbeat_in_flight = False
        if not subscribed:
            self.request_rejoin("the assignment does not match the subscription")
            self._log(f"generation {generation}: assignment {sorted(assignment)} does not "
                      "match the subscription; rejoining")
            return []
        actions: list[Action] = []
        revoked = self.owned - assignment
        added = assignment - self.owned
        if revoked:
            # Only cooperative members still own partitions at this point.
            actions.append(RevokePartitions(frozenset(revoked)))
            self.request_rejoin("revoked partitions moved to other members")
        self.owned = assignment
        actions.append(AssignPartitions(frozenset(added), assignment))
        self._log(f"stable in generation {generation} with {len(assignment)} partitions")
        return actions

    # ---- heartbeat thread ---------------------------------------------------------------

    def heartbeat_tick(self, now: float) -> list[Action]:
        """Heartbeat if due; find a lost coordinator again; leave if the user stopped polling.

        The heartbeat thread looks the coordinator up itself (Kafka's HeartbeatThread), so
        a member busy between two polls keeps its session after a lost connection.
        """
        if self.fatal is not None or self.state == MemberState.UNJOINED:
            return []
        if now - self.last_poll > self.config.rebalance_timeout_ms:
            return self._poll_timeout(now)
        if not self.heartbeating():
            return []
        if self.coordinator is None:
            return [FindCoordinator()] if now >= self.retry_at else []
        if now - self.last_heartbeat_ok > self.config.session_timeout_ms:
            self.coordinator_dead("no heartbeat response within the session timeout", now)
            return []
        if self.heartbeat_in_flight or now < self.next_heartbeat:
            return []
        self.heartbeat_in_flight = True
        self.next_heartbeat = now + self.config.heartbeat_interval_ms
        return [SendHeartbeat(self.generation, self.member_id)]

    def heartbeat_delay(self, now: float) -> float:
        """Milliseconds until :meth:`heartbeat_tick` may have something to do."""
        if not self.heartbeating() or self.coordinator is None:
            return self.config.retry_backoff_ms
        until_poll = self.last_poll + self.config.rebalance_timeout_ms - now
        return max(0.0, min(self.next_heartbeat - now, until_poll,
                            self.config.retry_backoff_ms * 5))

    def _poll_timeout(self, now: float) -> list[Action]:
        self._log("max_poll_interval_ms exceeded: leaving the group")
        actions: list[Action] = []
        if not self.is_static and self.member_id and self.coordinator is not None:
            actions.append(SendLeaveGroup(self.member_id, "consumer poll timeout has expired"))
        self._reset_generation(reset_member=True)
        self.request_rejoin("poll timeout expired")
        return actions

    def on_heartbeat_failed(self, reason: str, now: float) -> None:
        """The heartbeat got no answer (disconnect, request timeout): find the coordinator
        again; the member keeps its generation."""
        self.coordinator_dead(f"heartbeat failed: {reason}", now)

    def on_heartbeat_response(self, code: int, now: float, generation: int) -> list[Action]:
        self.heartbeat_in_flight = False
        if code == ErrorCode.none:
            self.last_heartbeat_ok = now
            return []
        if generation != self.generation or self._joining():
            return []  # an old generation, or the JoinGroup answer will decide
        if code == ErrorCode.rebalance_in_progress:
            # While joining or syncing the member is already rebalancing: the JoinGroup or
            # SyncGroup answer tells it whether to join again (Kafka ignores it too).
            if self.state == MemberState.STABLE:
                self.request_rejoin("group is rebalancing")
            return []
        return self._on_group_error(code, now, "Heartbeat")

    # ---- offsets and leaving ------------------------------------------------------------

    def on_commit_error(self, code: int, now: float, generation: int) -> list[Action]:
        """An OffsetCommit failed with ``code``; same recovery as for heartbeats."""
        if code != ErrorCode.fenced_instance_id and (generation != self.generation
                                                     or self._joining()):
            return []
        if code == ErrorCode.rebalance_in_progress:
            self.request_rejoin("commit during a rebalance")
            return []
        return self._on_group_error(code, now, "OffsetCommit")

    def leave(self, reason: str) -> list[Action]:
        """The consumer closes or unsubscribes: leave (dynamic members only) and reset."""
        actions: list[Action] = []
        if not self.is_static and self.member_id and self.coordinator is not None:
            actions.append(SendLeaveGroup(self.member_id, reason))
        self._reset_generation(reset_member=True)
        self.owned = frozenset()
        self.needs_join_prepare = True
        return actions

    # ---- shared error handling ----------------------------------------------------------

    def _joining(self) -> bool:
        """JoinGroup in flight: its answer, not an older request's, decides what is next."""
        return self.state == MemberState.REBALANCING and self.awaiting == "join"

    def _on_group_error(self, code: int, now: float, what: str) -> list[Action]:
        self._log(f"{what} error {code}")
        if code == ErrorCode.unknown_member_id:
            self._reset_generation(reset_member=True)
            self.request_rejoin(f"{what}: unknown member id")
            return []
        if code == ErrorCode.illegal_generation:
            self._reset_generation(reset_member=False)
            self.request_rejoin(f"{what}: illegal generation")
            return []
        if code == ErrorCode.rebalance_in_progress:
            self.request_rejoin(f"{what}: rebalance in progress")
            return []
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead(f"{what} error {code}", now)
            return []
        if code == ErrorCode.coordinator_load_in_progress:
            self.tracker.back_off(now)
            return []
        return self._fatal_if(code, f"{what} failed")

    def _fatal_if(self, code: int, message: str) -> list[Action]:
        if code in (ErrorCode.none, ErrorCode.coordinator_load_in_progress) or \
                code in COORDINATOR_ERRORS:
            return []
        self.fatal = RaiseError(code, f"{message} with error {code}")
        return [self.fatal]

    def _lookup_fatal(self, code: int, reason: str) -> RaiseError:
        self.fatal = RaiseError(code, f"{reason or 'FindCoordinator failed'} with error {code}")
        return self.fatal

    def _reset_generation(self, *, reset_member: bool) -> None:
        self.generation = NO_GENERATION
        self.protocol = None
        self.leader_id = None
        if reset_member:
            self.member_id = NO_MEMBER_ID
        self.state = MemberState.UNJOINED
        self.awaiting = ""
        self.heartbeat_in_flight = False
