"""Read-only views of a shard's groups and offsets (metrics, DescribeGroups, ListGroups,
tests): frozen copies, so nothing outside the coordinator holds its live objects.

Every group type is covered: classic groups, KIP-848 consumer groups and KIP-932 share
groups (``GroupSummary.group_type``). For a consumer or share group the summary's
generation is its group epoch, its protocol the server assignor (most members name; share
groups: ``simple``), and there is no leader.

:class:`~samsa.coordinator.Coordinator` offers these for every shard it owns
(``group_summaries()``, ``group_summary(id)``, ``describe(id)``, ``committed_offsets(id)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.coordinator.consumer.describe import CONSUMER_GROUP_TYPE, CONSUMER_PROTOCOL_TYPE
from samsa.coordinator.consumer.group import (
    CONSUMER_STATE_NAMES,
    ConsumerGroup,
    ConsumerGroupState,
)
from samsa.coordinator.consumer.target import preferred_assignor
from samsa.coordinator.core import ShardCore
from samsa.coordinator.group import Group
from samsa.coordinator.share.group import (
    SHARE_ASSIGNOR,
    SHARE_GROUP_TYPE,
    SHARE_PROTOCOL_TYPE,
    SHARE_STATE_NAMES,
    ShareGroup,
    ShareGroupState,
)
from samsa.coordinator.state import CLASSIC_STATE_NAMES, GroupState

CLASSIC_GROUP_TYPE = "classic"

#: a classic group's state, a consumer group's (Empty, Assigning, Reconciling, Stable) or a
#: share group's (Empty, Stable)
AnyGroupState = GroupState | ConsumerGroupState | ShareGroupState
#: every state name of the group types, classic ones first
STATE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(
    CLASSIC_STATE_NAMES + CONSUMER_STATE_NAMES + SHARE_STATE_NAMES))
#: the state names of a group in a rebalance (classic: until SyncGroup; consumer: until
#: every member reconciled to the target assignment)
REBALANCING_STATE_NAMES = frozenset({
    GroupState.PREPARING_REBALANCE.value, GroupState.COMPLETING_REBALANCE.value,
    ConsumerGroupState.ASSIGNING.value, ConsumerGroupState.RECONCILING.value})


@dataclass(frozen=True)
class GroupSummary:
    """One group as ListGroups and the metrics see it."""

    group_id: str
    state: AnyGroupState
    protocol_type: str
    #: the selected protocol ("" before the first generation)
    protocol: str
    #: the leader's member id ("" without one, and for consumer groups)
    leader: str
    #: the classic generation, or a consumer group's group epoch
    generation: int
    members: int
    #: the ``__consumer_offsets`` partition (shard) the group lives in
    partition: int
    group_type: str = CLASSIC_GROUP_TYPE


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    #: the subscription for the group's protocol and the assignment: shown for a Stable
    #: classic group only (b"" otherwise, and always for consumer groups)
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    """One group in detail (DescribeGroups and tests)."""

    summary: GroupSummary
    members: tuple[MemberDescription, ...]
    #: member ids handed out with MEMBER_ID_REQUIRED that have not joined yet
    pending_members: tuple[str, ...]
    #: topics the members subscribe to (consumer protocol; None when unknown)
    subscribed_topics: frozenset[str] | None

    @property
    def member_ids(self) -> tuple[str, ...]:
        return tuple(m.member_id for m in self.members)


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int


def summary(core: ShardCore, group: Group) -> GroupSummary:
    return GroupSummary(
        group_id=group.group_id,
        state=group.state,
        protocol_type=group.protocol_type or "",
        protocol=group.protocol_name or "",
        leader=group.leader_id or "",
        generation=group.generation,
        members=len(group.members),
        partition=core.partition,
    )


def consumer_summary(core: ShardCore, group: ConsumerGroup) -> GroupSummary:
    return GroupSummary(
        group_id=group.group_id,
        state=group.state,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol=preferred_assignor(core, group),
        leader="",
        generation=group.epoch,
        members=len(group.members),
        partition=core.partition,
        group_type=CONSUMER_GROUP_TYPE,
    )


def share_summary(core: ShardCore, group: ShareGroup) -> GroupSummary:
    return GroupSummary(
        group_id=group.group_id,
        state=group.state,
        protocol_type=SHARE_PROTOCOL_TYPE,
        protocol=SHARE_ASSIGNOR,
        leader="",
        generation=group.epoch,
        members=len(group.members),
        partition=core.partition,
        group_type=SHARE_GROUP_TYPE,
    )


def group_summary(core: ShardCore, group_id: str) -> GroupSummary | None:
    found = core.find_group(group_id)
    return None if found is None else found[0].summary(core, found[1])


def state_of(core: ShardCore, group_id: str) -> tuple[AnyGroupState, int] | None:
    """The group's state and generation (a consumer or share group's: its group epoch)."""
    found = group_summary(core, group_id)
    return None if found is None else (found.state, found.generation)


def summaries(core: ShardCore) -> list[GroupSummary]:
    """Every live group of the shard, family by family (classic, consumer, share), each in
    creation order."""
    return [family.summary(core, g) for family in core.families for g in family.groups(core)]


def describe(core: ShardCore, group_id: str) -> GroupDescription | None:
    found = core.find_group(group_id)
    return None if found is None else found[0].describe(core, found[1])


def describe_classic(core: ShardCore, group: Group) -> GroupDescription:
    stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
    protocol = group.protocol_name if stable and group.protocol_name is not None else ""
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            metadata=m.metadata(protocol) if stable else b"",
            assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return GroupDescription(
        summary(core, group), members, tuple(group.pending_members), group.subscribed_topics
    )


def describe_consumer(core: ShardCore, group: ConsumerGroup) -> GroupDescription:
    """A consumer group's members (epochs and assignments: ConsumerGroupDescribe); each
    session timeout is the group's ``consumer.session.timeout.ms``, or the classic
    one a member running the classic protocol joined with."""
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=(m.classic.session_timeout_ms if m.classic is not None
                                else core.config.consumer_session_timeout_for(group.group_id)),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            metadata=b"",
            assignment=b"",
        )
        for m in group.members.values()
    )
    return GroupDescription(consumer_summary(core, group), members, (),
                            group.subscribed_topic_names())


def describe_share(core: ShardCore, group: ShareGroup) -> GroupDescription:
    """A share group's members; each session timeout is the group's
    ``share.session.timeout.ms``."""
    session = core.config.share_session_timeout_for(group.group_id)
    members = tuple(
        MemberDescription(m.member_id, None, m.client_id, m.client_host, session, -1, b"", b"")
        for m in group.members.values())
    return GroupDescription(share_summary(core, group), members, (),
                            group.subscribed_topic_names())


def committed_offsets(core: ShardCore, group_id: str) -> tuple[CommittedOffset, ...]:
    """The group's committed offsets, by topic and partition."""
    offsets = core.offsets_of(group_id)
    return tuple(
        CommittedOffset(topic, partition, v.offset, v.leader_epoch, v.metadata,
                        v.commit_timestamp, v.expire_timestamp)
        for (topic, partition), v in sorted(offsets.items())
    )
