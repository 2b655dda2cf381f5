"""The live (soft) model of one classic group and its members.

Everything here is in-memory state beside the persisted records: parked requests (tokens),
pending members, join/sync bookkeeping. The persisted projection is :meth:`Group.to_record`.
Methods mirror Kafka's ``GroupMetadata``/``ClassicGroup``; they never emit records, replies or
timers (the procedures in :mod:`samsa.coordinator.rebalance` do that).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from samsa.coordinator.events import NO_MEMBER_ID
from samsa.coordinator.family import (
    ACCEPT,
    CommitCheck,
    ExpirationCondition,
    commit_timestamp,
)
from samsa.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    RecordKey,
)
from samsa.coordinator.state import (
    Do,
    GroupState,
    Request,
    answer,
    apply_transition,
    as_error,
    dead_answer,
    initial_state,
)

E = ErrorCode

Protocols = tuple[tuple[str, bytes], ...]


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    is_new: bool = False
    awaiting_join: bool = False
    join_token: object = None
    awaiting_sync: bool = False
    sync_token: object = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        return tuple(protocols) == tuple(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: dict[str, None] = field(default_factory=dict)
    pending_sync: dict[str, None] = field(default_factory=dict)
    #: initial-delay bookkeeping (Kafka's InitialDelayedJoin)
    new_member_added: bool = False
    initial_delay_ms: int = 0
    initial_remaining_ms: int = 0
    subscribed_topics: frozenset[str] | None = None
    #: how many members support each protocol (Kafka's ``supportedProtocols``); built
    #: lazily from ``members``, then kept up to date by add/remove/set_protocols so a join
    #: does not rescan every member (None after a clone or a load: rebuilt on demand)
    _protocol_counts: dict[str, int] | None = field(
        default=None, init=False, compare=False, repr=False)
    #: members with a parked JoinGroup (Kafka's ``numMembersAwaitingJoin``), kept the same
    #: way so a join does not count them all (None after a clone or a load)
    _awaiting_join: int | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.state = initial_state(self.state)

    # ------------------------------------------------------------------ state

    def transition(self, target: GroupState, now_ms: int) -> None:
        self.state = apply_transition(self.state, target)
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # ------------------------------------------------------------------ membership

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.awaiting_join and self._awaiting_join is not None:
            self._awaiting_join += 1
        self._count_protocols(member, +1)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.awaiting_join and self._awaiting_join is not None:
                self._awaiting_join -= 1
        instance_id = member.group_instance_id if member is not None else None
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Re-key a static member under ``new_id`` (callers answer the old parked requests)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            del self.pending_sync[old_id]
            self.pending_sync[new_id] = None
        return member

    def has_static(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def is_static_fenced(self, instance_id: str | None, member_id: str) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def set_awaiting_join(self, member: Member, awaiting: bool) -> None:
        """Mark ``member`` as having a parked JoinGroup or not (keeps the count right)."""
        if member.awaiting_join == awaiting:
            return
        member.awaiting_join = awaiting
        if self._awaiting_join is not None and self.members.get(member.member_id) is member:
            self._awaiting_join += 1 if awaiting else -1

    def num_awaiting_join(self) -> int:
        if self._awaiting_join is None:
            self._awaiting_join = sum(1 for m in self.members.values() if m.awaiting_join)
        return self._awaiting_join

    def has_all_members_joined(self) -> bool:
        # Pending members first: it saves a scan of every member per join of a big group.
        return not self.pending_members and len(self.members) == self.num_awaiting_join()

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Kafka's ``maybeElectNewJoinedLeader``: keep a rejoined leader, else pick any
        rejoined member; False if there is no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        return not self.members or any(n in self.candidate_protocols() for n in names)

    def candidate_protocols(self) -> set[str]:
        if self._protocol_counts is None:
            counts: dict[str, int] = {}
            for m in self.members.values():
                for name in set(m.protocol_names()):
                    counts[name] = counts.get(name, 0) + 1
            self._protocol_counts = counts
        return {name for name, c in self._protocol_counts.items() if c == len(self.members)}

    def set_protocols(self, member: Member, protocols: Protocols) -> None:
        """Change a member's protocols (keeps the per-protocol counts right)."""
        self._count_protocols(member, -1)
        member.protocols = tuple(protocols)
        self._count_protocols(member, +1)

    def _count_protocols(self, member: Member, delta: int) -> None:
        counts = self._protocol_counts
        if counts is None:
            return
        for name in set(member.protocol_names()):
            left = counts.get(name, 0) + delta
            if left:
                counts[name] = left
            else:
                counts.pop(name, None)

    def select_protocol(self) -> str:
        """Every member votes for its first candidate; most votes wins, ties go to the
        protocol that got its first vote earliest (member insertion order)."""
        if not self.members:
            raise ValueError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, n in votes.items() if n == best)

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def member_error(self, member_id: str, instance_id: str | None) -> int | None:
        """Kafka's ``validateCurrentMember``: a given instance id must exist and map to
        ``member_id`` (else UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID); a dynamic member must
        exist."""
        if instance_id is not None:
            if not self.has_static(instance_id):
                return E.unknown_member_id
            if self.is_static_fenced(instance_id, member_id):
                return E.fenced_instance_id
            return None
        if member_id not in self.members:
            return E.unknown_member_id
        return None

    # ------------------------------------------------------------------ the group interface
    # (:class:`samsa.coordinator.family.OffsetsGroup`, Kafka's ``ClassicGroup``)

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int,
                               api_version: int | None) -> CommitCheck:
        """Generation < 0 on an Empty group is a simple consumer (accepted whatever member
        id it sends); otherwise member + generation, then the state's cell (Stable and
        PreparingRebalance renew the member's session)."""
        cell = answer(Request.OFFSET_COMMIT, self.state)
        if self.is_(GroupState.DEAD):
            return CommitCheck(dead_answer(Request.OFFSET_COMMIT))
        if generation_or_epoch < 0 and cell is Do.STORE_SIMPLE:
            return ACCEPT
        if generation_or_epoch >= 0 or member_id != NO_MEMBER_ID or instance_id is not None:
            error = self.member_error(member_id, instance_id)
            if error is None and generation_or_epoch != self.generation:
                error = E.illegal_generation
        else:
            error = E.unknown_member_id
        if error is None and isinstance(cell, ErrorCode):
            error = cell
        if error is not None:
            return CommitCheck(error)
        if cell is Do.STORE_RENEW:
            renews = member_id if instance_id is None else self.static_members[instance_id]
            return CommitCheck(renews=renews)
        return ACCEPT

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        return None

    def validate_offset_delete(self) -> int | None:
        cell = answer(Request.OFFSET_DELETE, self.state)
        if isinstance(cell, ErrorCode):
            return cell
        if cell is Do.DELETE_UNSUBSCRIBED and self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return E.non_empty_group
        return None

    def validate_delete_group(self) -> int | None:
        cell = answer(Request.DELETE_GROUP, self.state)
        return None if cell is Do.DELETE_GROUP else as_error(cell)

    def is_empty(self) -> bool:
        return self.is_(GroupState.EMPTY)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """An Empty group subscribes to nothing (its offsets can all be deleted)."""
        return not self.is_empty() and self.is_subscribed_to(topic)

    def should_expire(self) -> bool:
        return True

    def offset_expiration_condition(self) -> ExpirationCondition | None:
        """Kafka's ``ClassicGroup.offsetExpirationCondition``: an Empty group's offsets
        expire from when it became Empty; a Stable consumer-protocol group's offsets of
        topics it does not subscribe to from their commit; a simple group's from their
        commit; others' never."""
        if self.protocol_type is None:
            return ExpirationCondition(commit_timestamp)
        if self.is_empty():
            since = self.state_timestamp
            if since is None:
                return ExpirationCondition(commit_timestamp)
            return ExpirationCondition(lambda _v: since)
        if (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
                and self.is_(GroupState.STABLE)):
            return ExpirationCondition(commit_timestamp, self.subscribed_topics)
        return None

    def group_tombstone_keys(self) -> list[RecordKey]:
        """The metadata's key, unless it never had a generation (offset-only groups never
        wrote one)."""
        return [GroupMetadataKey(self.group_id)] if self.generation > 0 else []

    # ------------------------------------------------------------------ persistence

    def to_record(self, assignments: dict[str, bytes]) -> GroupMetadataValue:
        """The group metadata value Kafka writes for this group and ``assignments``."""
        protocol = self.protocol_name
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp is None else self.state_timestamp,
            members=tuple(
                MemberMetadataValue(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol is not None else b"",
                    assignment=assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue | None) -> Group:
        """A loaded group: Stable with its members, or Empty (Kafka's ``loadGroup``).

        That is the group's initial state (``state.INITIAL_STATES``, checked when it is
        built); no transition is made (Empty -> Stable is not one)."""
        loaded_stable = value is not None and bool(value.members)
        group = cls(group_id, state=GroupState.STABLE if loaded_stable else GroupState.EMPTY)
        if value is None:
            return group
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp = (
            None if value.current_state_timestamp == -1 else value.current_state_timestamp
        )
        for mv in value.members:
            protocols: Protocols = ((value.protocol or "", mv.subscription),)
            member = Member(
                member_id=mv.member_id,
                group_instance_id=mv.group_instance_id,
                client_id=mv.client_id,
                client_host=mv.client_host,
                rebalance_timeout_ms=mv.rebalance_timeout,
                session_timeout_ms=mv.session_timeout,
                protocol_type=value.protocol_type,
                protocols=protocols,
                assignment=mv.assignment,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members and group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
