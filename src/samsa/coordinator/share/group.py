"""Share groups as their records say: a share group's hard state is its live state.

A share group (KIP-932) has a group epoch (bumped by every change of its members or their
subscriptions), a target assignment computed at an assignment epoch, and per member the
current assignment and member epoch. Members never revoke: a partition may be shared by
several members, so a member takes its target assignment as soon as it heartbeats.
States (ShareGroupDescribe, ListGroups): Empty without members, else Stable.

A share group implements the group interface (:class:`~samsa.coordinator.family.OffsetsGroup`)
as Kafka's ``ShareGroup``: it has no committed offsets in ``__consumer_offsets`` (its share
partitions' start offsets are share-partition state), so OffsetCommit, OffsetFetch and
OffsetDelete naming it are GROUP_ID_NOT_FOUND; DeleteGroups needs it Empty; the offsets
expiry sweep never deletes it.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from samsa.coordinator.events import TopicPartitions
from samsa.coordinator.family import CommitCheck, ExpirationCondition
from samsa.coordinator.share.records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareRecordKey,
    ShareRecordValue,
)

if TYPE_CHECKING:
    from samsa.coordinator.records import RecordKey

E = ErrorCode

SHARE_GROUP_TYPE = "share"
SHARE_PROTOCOL_TYPE = "share"
SHARE_ASSIGNOR = "simple"

#: topic id -> partitions
Assignment = dict[uuid.UUID, tuple[int, ...]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


SHARE_STATE_NAMES = tuple(s.value for s in ShareGroupState)


def to_topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(t, tuple(sorted(ps)))
                 for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps)


def from_topic_partitions(tps: tuple[TopicPartitions, ...]) -> Assignment:
    return {tp.topic_id: tuple(tp.partitions) for tp in tps}


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)

    def metadata_value(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(self.rack_id, self.client_id, self.client_host,
                                             self.subscribed_topic_names)

    def assignment_value(self) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(
            self.member_epoch, self.previous_member_epoch, 0,
            to_topic_partitions(self.assigned))


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed_topic_names)

    # the group interface (samsa.coordinator.family.OffsetsGroup), as Kafka's ShareGroup

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int,
                               api_version: int | None) -> CommitCheck:
        return CommitCheck(E.group_id_not_found)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        return E.group_id_not_found

    def validate_offset_delete(self) -> int | None:
        return E.group_id_not_found

    def validate_delete_group(self) -> int | None:
        return None if self.is_empty() else E.non_empty_group

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def offset_expiration_condition(self) -> ExpirationCondition | None:
        """None: a share group has no offsets in ``__consumer_offsets``."""
        return None

    def should_expire(self) -> bool:
        """Never deleted by the offsets expiry sweep (Kafka's ``ShareGroup.shouldExpire``)."""
        return False

    def group_tombstone_keys(self) -> list[RecordKey]:
        """Kafka's ``ShareGroup.createGroupTombstoneRecords``: current assignments, target
        members, target metadata, member metadata; the epoch tombstone last (its replay
        removes the group)."""
        gid = self.group_id
        members = list(self.members)
        return [
            *(ShareGroupCurrentMemberAssignmentKey(gid, mid) for mid in members),
            *(ShareGroupTargetAssignmentMemberKey(gid, mid) for mid in self.target),
            ShareGroupTargetAssignmentMetadataKey(gid),
            *(ShareGroupMemberMetadataKey(gid, mid) for mid in members),
            ShareGroupMetadataKey(gid),
        ]


@dataclass
class ShareGroups:
    """Every share group of a shard; changes only by :meth:`replay`."""

    groups: dict[str, ShareGroup] = field(default_factory=dict)

    def replay(self, key: ShareRecordKey, value: ShareRecordValue | None) -> None:
        gid = key.group
        group = self.groups.get(gid)
        if isinstance(key, ShareGroupMetadataKey):
            if value is None:
                self.groups.pop(gid, None)
                return
            assert isinstance(value, ShareGroupMetadataValue)
            group = self.groups.setdefault(gid, ShareGroup(gid))
            group.epoch, group.metadata_hash = value.epoch, value.metadata_hash
            return
        if value is not None and group is None:
            group = self.groups.setdefault(gid, ShareGroup(gid))
        if group is None:
            return
        if isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            assert value is None or isinstance(value, ShareGroupTargetAssignmentMetadataValue)
            group.assignment_epoch = 0 if value is None else value.assignment_epoch
        elif isinstance(key, ShareGroupMemberMetadataKey):
            if value is None:
                group.members.pop(key.member_id, None)
                return
            assert isinstance(value, ShareGroupMemberMetadataValue)
            member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
            member.rack_id, member.client_id = value.rack_id, value.client_id
            member.client_host = value.client_host
            member.subscribed_topic_names = value.subscribed_topic_names
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            if value is None:
                group.target.pop(key.member_id, None)
                return
            assert isinstance(value, ShareGroupTargetAssignmentMemberValue)
            group.target[key.member_id] = from_topic_partitions(value.topic_partitions)
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            if value is None:  # the member metadata's tombstone follows and removes it
                return
            assert isinstance(value, ShareGroupCurrentMemberAssignmentValue)
            found = group.members.setdefault(key.member_id, ShareMember(key.member_id))
            found.member_epoch = value.member_epoch
            found.previous_member_epoch = value.previous_member_epoch
            found.assigned = from_topic_partitions(value.assigned_partitions)
