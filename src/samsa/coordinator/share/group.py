"""Share groups as their records say: a share group's hard state is its live state.

A share group (KIP-932) has a group epoch (bumped by every change of its members or their
subscriptions), a target assignment computed at an assignment epoch, and per member the
current assignment and member epoch. Members never revoke: a partition may be shared by
several members, so a member takes its target assignment as soon as it heartbeats.
States (ShareGroupDescribe, ListGroups): Empty without members, else Stable.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from samsa.coordinator.events import TopicPartitions
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
