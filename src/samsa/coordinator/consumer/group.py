"""The live model of consumer (KIP-848) groups, built only by replaying records.

As in Kafka's ``ConsumerGroup``, a handler reads this state, computes the records of a
change and writes them; :meth:`ConsumerGroups.replay` applies each record at once (the
shard's ``write`` replays as it appends), so loading a shard from its log and running it
live give equal values. What is not in a record is soft: timers, and the caches marked
``compare=False``.

Epochs: the *group epoch* grows when membership, subscriptions or subscribed topic
metadata change; the *assignment epoch* is the group epoch a target assignment was
computed for; a *member epoch* is the assignment epoch a member reconciled to (never above
the group epoch). A new group starts at group and assignment epoch 1 with an empty target
(Kafka 4.3, KAFKA-20268): its first computed target is epoch 2, and a member that joins
before it lands reconciles to epoch 1 meanwhile. The target metadata record also keeps when
the last target computation finished (``assignment_timestamp``, KIP-1263's batching).
Each partition a member holds also has the member epoch at which it was given to the
member (``ConsumerMember.assignment_epochs``, Kafka 4.3's KIP-1251), which offset commits
are checked against (:mod:`.commits`). Group states are derived, as Kafka's
``ConsumerGroupState``.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from samsa.coordinator.consumer import commits
from samsa.coordinator.consumer.records import (
    AssignedTopicPartitions,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecordKey,
    ConsumerRecordValue,
)
from samsa.coordinator.events import TopicPartitions
from samsa.coordinator.family import CommitCheck, ExpirationCondition, commit_timestamp
from samsa.coordinator.records import RecordKey

#: topic id -> partitions (never an empty set).
Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Assignment = {}
#: (topic id, partition) -> the member epoch at which the member was given the partition.
PartitionEpochs = Mapping[tuple[uuid.UUID, int], int]

E = ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` (its byte values are the record's)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


CONSUMER_STATE_NAMES: tuple[str, ...] = tuple(s.value for s in ConsumerGroupState)


def to_topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    """A canonical (sorted) wire form of an assignment."""
    return tuple(
        TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps
    )


def from_topic_partitions(
    items: Iterable[TopicPartitions] | Iterable[AssignedTopicPartitions] | None,
) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for tp in items or ():
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {t: frozenset(ps) for t, ps in out.items() if ps}


def count(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())


def stamp_epochs(held: Iterable[Assignment], previous: PartitionEpochs,
                 epoch: int) -> dict[tuple[uuid.UUID, int], int]:
    """The assignment epoch of every partition in ``held``: the one it had in ``previous``,
    else ``epoch`` (Kafka's ``CurrentAssignmentBuilder`` gives a newly assigned partition
    the epoch the member moves to; a kept or revoking partition keeps its own)."""
    return {(t, p): previous.get((t, p), epoch)
            for assignment in held for t, ps in assignment.items() for p in ps}


def epochs_from_record(value: ConsumerGroupCurrentMemberAssignmentValue,
                       ) -> dict[tuple[uuid.UUID, int], int]:
    """The assignment epochs of a current member assignment record (Kafka 4.3's
    ``Utils.assignmentFromTopicPartitions``): a topic without them (a Kafka 4.0-4.2 record),
    or with more or fewer than it has partitions, takes the record's member epoch, 0 if
    negative (a static member that left)."""
    default = max(value.member_epoch, 0)
    out: dict[tuple[uuid.UUID, int], int] = {}
    for tp in (*value.assigned_partitions, *value.partitions_pending_revocation):
        epochs = tp.assignment_epochs
        if epochs is None or len(epochs) != len(tp.partitions):
            epochs = (default,) * len(tp.partitions)
        out.update(((tp.topic_id, p), e) for p, e in zip(tp.partitions, epochs, strict=True))
    return out


@dataclass(frozen=True)
class ConsumerMember:
    """One member: its subscription (member metadata record) and its current assignment
    (current member assignment record)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: the epoch at which the member was given each partition it holds (assigned or
    #: pending revocation), KIP-1251; change it with :func:`stamp_epochs`
    assignment_epochs: PartitionEpochs = field(default_factory=dict)
    #: set while the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def classic_protocol_name(self) -> str:
        """The protocol a classic member is answered with: the first it supports."""
        assert self.classic is not None
        return self.classic.supported_protocols[0][0]

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=self._with_epochs(self.assigned),
            partitions_pending_revocation=self._with_epochs(self.pending_revocation),
        )

    def _with_epochs(self, assignment: Assignment) -> tuple[AssignedTopicPartitions, ...]:
        epochs = self.assignment_epochs
        return tuple(
            AssignedTopicPartitions(tp.topic_id, tp.partitions,
                                    tuple(epochs[(tp.topic_id, p)] for p in tp.partitions))
            for tp in to_topic_partitions(assignment))

    def same_subscription(self, other: ConsumerMember) -> bool:
        return self.metadata_value() == other.metadata_value()


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


#: KAFKA-20268: a group is created at group epoch 1 with an empty target at epoch 1
INITIAL_EPOCH = 1


@dataclass
class ConsumerGroup:
    group_id: str
    epoch: int = INITIAL_EPOCH
    metadata_hash: int = 0
    assignment_epoch: int = INITIAL_EPOCH
    #: when the computation of the current target finished (ms; 0: never or unknown)
    assignment_timestamp: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    #: (topic id, partition) -> epoch of the member that owns it (assigned or revoking)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    #: instance id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    #: derived from ``members``: regex -> how many members subscribe to it
    regex_counts: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: soft: no target computation before this time (one raised: retried later)
    retry_at: int = field(default=0, compare=False, repr=False)
    #: soft: a regex refresh asked for while a target job was awaited, with the topics
    #: filter of the member that asked (:mod:`.regex_refresh`)
    regex_refresh_after_target: tuple[Callable[[Iterable[str]], Iterable[str]] | None] | None = \
        field(default=None, compare=False, repr=False)
    #: soft: the member epoch a scheduled rebalance timeout was armed for
    revoking_epochs: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: soft: (topics version, epoch, members) when the metadata hash was last checked
    hash_checked: tuple[int, int, int] | None = field(default=None, compare=False, repr=False)
    #: soft: the topic ids of each distinct subscription (names, regex, the regex's topics)
    #: under the topics snapshot ``ids_topics`` (members mostly share one subscription)
    ids_cache: dict[tuple[tuple[str, ...], str | None, frozenset[str] | None],
                    frozenset[uuid.UUID]] = field(default_factory=dict, compare=False, repr=False)
    ids_topics: object = field(default=None, compare=False, repr=False)

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def all_classic_except(self, member_ids: Iterable[str]) -> bool:
        """Kafka's ``allMembersUseClassicProtocolExcept``: every member not in
        ``member_ids`` speaks the classic protocol."""
        leaving = set(member_ids)
        return all(m.classic is not None for mid, m in self.members.items()
                   if mid not in leaving)

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: a ``consumer`` protocol every classic
        member also supports (any non-empty list when the group is empty)."""
        if protocol_type != "consumer":
            return False
        wanted = list(names)
        if not self.members:
            return bool(wanted)
        classic = self.classic_members()
        return any(all(name in {p for p, _ in m.classic.supported_protocols}  # type: ignore[union-attr]
                       for m in classic) for name in wanted)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: a target partition the member lacks
        is still held by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target.get(member.member_id, {}).items():
            have = member.assigned.get(topic_id, frozenset())
            for p in partitions:
                if p not in have and self.partition_epoch(topic_id, p) != -1:
                    return True
        return False

    def subscribed_regexes(self) -> Mapping[str, int]:
        """Each regex the members subscribe to, with how many do (kept up to date by
        replay: a heartbeat asks without scanning the members)."""
        return self.regex_counts

    def subscribed_topic_names(self) -> frozenset[str]:
        """Topic names any member subscribes to, by name or through a resolved regex."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                resolved = self.regexes.get(m.subscribed_topic_regex)
                if resolved is not None:
                    names.update(resolved.topics)
        return frozenset(names)

    # ------------------------------------------------------------------ the group interface
    # (:class:`samsa.coordinator.family.OffsetsGroup`, Kafka's ``ConsumerGroup``)

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int,
                               api_version: int | None) -> CommitCheck:
        """:func:`.commits.validate_offset_commit` (KIP-1251)."""
        return commits.validate_offset_commit(self, member_id, generation_or_epoch, api_version)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        """:func:`.commits.validate_offset_fetch`."""
        return commits.validate_offset_fetch(self, member_id, member_epoch)

    def validate_offset_delete(self) -> int | None:
        """Allowed in any state (subscribed topics are refused one by one)."""
        return None

    def validate_delete_group(self) -> int | None:
        return None if self.is_empty() else E.non_empty_group

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def should_expire(self) -> bool:
        return True

    def offset_expiration_condition(self) -> ExpirationCondition:
        """Offsets of topics no member subscribes to expire from their commit."""
        return ExpirationCondition(commit_timestamp, self.subscribed_topic_names())

    def group_tombstone_keys(self) -> list[RecordKey]:
        """Kafka's ``ConsumerGroup.createGroupTombstoneRecords``: current assignments,
        target members, target metadata, member metadata, regexes; the epoch tombstone last
        (its replay removes the group)."""
        gid = self.group_id
        members = list(self.members)
        return [
            *(ConsumerGroupCurrentMemberAssignmentKey(gid, mid) for mid in members),
            *(ConsumerGroupTargetAssignmentMemberKey(gid, mid) for mid in self.target),
            ConsumerGroupTargetAssignmentMetadataKey(gid),
            *(ConsumerGroupMemberMetadataKey(gid, mid) for mid in members),
            *(ConsumerGroupRegularExpressionKey(gid, regex) for regex in self.regexes),
            ConsumerGroupMetadataKey(gid),
        ]

    def last_regex_refresh(self) -> tuple[int, int] | None:
        """(timestamp, topics version) of the latest resolution of the group's regexes
        (Kafka's ``lastResolvedRegularExpressionRefreshTimeMs`` and ``...Version``); None
        when none is resolved."""
        if not self.regexes:
            return None
        return (max(r.timestamp for r in self.regexes.values()),
                max(r.version for r in self.regexes.values()))

    # ------------------------------------------------------------------ replay

    def _count_regex(self, regex: str | None, step: int) -> None:
        if regex:
            n = self.regex_counts.get(regex, 0) + step
            if n:
                self.regex_counts[regex] = n
            else:
                self.regex_counts.pop(regex, None)

    def _set_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            if old.instance_id is not None and self.static_members.get(old.instance_id) == \
                    old.member_id:
                del self.static_members[old.instance_id]
            self._release(old)
            self._count_regex(old.subscribed_topic_regex, -1)
        self._count_regex(member.subscribed_topic_regex, 1)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own(member)

    def _remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._release(old)
        self._count_regex(old.subscribed_topic_regex, -1)
        self.revoking_epochs.pop(member_id, None)

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _own(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    held = self.partition_epochs.get((topic_id, p))
                    if held is not None:
                        raise AssertionError(
                            f"group {self.group_id}: partition {topic_id}-{p} given to "
                            f"{member.member_id} while still owned at epoch {held}")
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    def replay(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        match key:
            case ConsumerGroupMetadataKey():
                if value is not None:
                    assert isinstance(value, ConsumerGroupMetadataValue)
                    self.epoch = value.epoch
                    self.metadata_hash = value.metadata_hash
            case ConsumerGroupMemberMetadataKey():
                if value is None:
                    self._remove_member(key.member_id)
                else:
                    assert isinstance(value, ConsumerGroupMemberMetadataValue)
                    old = self.members.get(key.member_id) or ConsumerMember(key.member_id)
                    self._set_member(replace(
                        old,
                        instance_id=value.instance_id,
                        rack_id=value.rack_id,
                        client_id=value.client_id,
                        client_host=value.client_host,
                        subscribed_topic_names=value.subscribed_topic_names,
                        subscribed_topic_regex=value.subscribed_topic_regex,
                        rebalance_timeout_ms=value.rebalance_timeout_ms,
                        server_assignor=value.server_assignor,
                        classic=value.classic_member_metadata,
                    ))
            case ConsumerGroupTargetAssignmentMetadataKey():
                if value is None:
                    self.assignment_epoch = -1
                    self.assignment_timestamp = 0
                else:
                    assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
                    self.assignment_epoch = value.assignment_epoch
                    self.assignment_timestamp = value.assignment_timestamp
            case ConsumerGroupTargetAssignmentMemberKey():
                if value is None:
                    self.target.pop(key.member_id, None)
                else:
                    assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                    self.target[key.member_id] = from_topic_partitions(value.topic_partitions)
            case ConsumerGroupCurrentMemberAssignmentKey():
                old = self.members.get(key.member_id) or ConsumerMember(key.member_id)
                if value is None:
                    if key.member_id in self.members:
                        self._set_member(replace(
                            old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            state=MemberState.STABLE, assigned={}, pending_revocation={},
                            assignment_epochs={}))
                else:
                    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
                    self._set_member(replace(
                        old,
                        member_epoch=value.member_epoch,
                        previous_member_epoch=value.previous_member_epoch,
                        state=MemberState.of(value.state),
                        assigned=from_topic_partitions(value.assigned_partitions),
                        pending_revocation=from_topic_partitions(
                            value.partitions_pending_revocation),
                        assignment_epochs=epochs_from_record(value),
                    ))
            case ConsumerGroupRegularExpressionKey():
                if value is None:
                    self.regexes.pop(key.regex, None)
                else:
                    assert isinstance(value, ConsumerGroupRegularExpressionValue)
                    self.regexes[key.regex] = ResolvedRegex(
                        frozenset(value.topics), value.version, value.timestamp)


@dataclass
class ConsumerGroups:
    """Every consumer group of one shard (part of the shard's hard state)."""

    groups: dict[str, ConsumerGroup] = field(default_factory=dict)

    def replay(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        group = self.groups.get(key.group)
        if isinstance(key, ConsumerGroupMetadataKey) and value is None:
            # Kafka's replay of the epoch tombstone removes the group.
            self.groups.pop(key.group, None)
            return
        if group is None:
            if value is None:
                return
            group = self.groups[key.group] = ConsumerGroup(key.group)
        group.replay(key, value)
