"""The records of share (KIP-932) groups, made from the coordinator's values (Kafka's
``GroupCoordinatorRecordHelpers``): pure, each a ``(key, value)`` pair for
:meth:`~samsa.coordinator.core.ShardCore.write`, a tombstone's value ``None``. A member's
tombstones are made here (:func:`member_tombstones`), a whole group's by the group
(:meth:`.group.ShareGroup.group_tombstone_keys`)."""

from __future__ import annotations

from samsa.coordinator.share.group import Assignment, ShareMember, to_topic_partitions
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
)

Tombstone = tuple[ShareRecordKey, None]


def member_subscription(
    group_id: str, member: ShareMember,
) -> tuple[ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue]:
    return ShareGroupMemberMetadataKey(group_id, member.member_id), member.metadata_value()


def group_epoch(group_id: str, epoch: int, metadata_hash: int = 0,
                ) -> tuple[ShareGroupMetadataKey, ShareGroupMetadataValue]:
    return ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(epoch, metadata_hash)


def target_member(
    group_id: str, member_id: str, assignment: Assignment,
) -> tuple[ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue]:
    return (ShareGroupTargetAssignmentMemberKey(group_id, member_id),
            ShareGroupTargetAssignmentMemberValue(to_topic_partitions(assignment)))


def target_member_tombstone(group_id: str, member_id: str) -> Tombstone:
    return ShareGroupTargetAssignmentMemberKey(group_id, member_id), None


def target_epoch(
    group_id: str, epoch: int,
) -> tuple[ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue]:
    return (ShareGroupTargetAssignmentMetadataKey(group_id),
            ShareGroupTargetAssignmentMetadataValue(epoch))


def current_assignment(
    group_id: str, member: ShareMember,
) -> tuple[ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue]:
    return (ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
            member.assignment_value())


def member_tombstones(group_id: str, member_id: str, targeted: bool) -> list[Tombstone]:
    """Kafka's ``removeMember``: current assignment, target (``targeted``: the member has
    one), subscription (the order matters for replay)."""
    return [
        (ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        *([target_member_tombstone(group_id, member_id)] if targeted else []),
        (ShareGroupMemberMetadataKey(group_id, member_id), None),
    ]
