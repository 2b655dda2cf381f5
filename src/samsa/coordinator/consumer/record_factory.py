"""The records of consumer (KIP-848) groups, made from the coordinator's values (Kafka's
``GroupCoordinatorRecordHelpers``): pure, each a ``(key, value)`` pair for
:meth:`~samsa.coordinator.core.ShardCore.write`, a tombstone's value ``None``. A member's
tombstones are made here (:func:`member_tombstones`), a whole group's by the group
(:meth:`.group.ConsumerGroup.group_tombstone_keys`, Kafka's ``createGroupTombstoneRecords``)."""

from __future__ import annotations

from samsa.coordinator.consumer.group import (
    Assignment,
    ConsumerMember,
    to_topic_partitions,
)
from samsa.coordinator.consumer.records import (
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
)

Tombstone = tuple[ConsumerRecordKey, None]


def member_subscription(
    group_id: str, member: ConsumerMember,
) -> tuple[ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue]:
    return ConsumerGroupMemberMetadataKey(group_id, member.member_id), member.metadata_value()


def group_epoch(group_id: str, epoch: int, metadata_hash: int,
                ) -> tuple[ConsumerGroupMetadataKey, ConsumerGroupMetadataValue]:
    return ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch, metadata_hash)


def target_member(
    group_id: str, member_id: str, assignment: Assignment,
) -> tuple[ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue]:
    return (ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
            ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(assignment)))


def target_epoch(
    group_id: str, epoch: int, timestamp: int,
) -> tuple[ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue]:
    return (ConsumerGroupTargetAssignmentMetadataKey(group_id),
            ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp))


def current_assignment(
    group_id: str, member: ConsumerMember,
) -> tuple[ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue]:
    return (ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
            member.assignment_value())


def regex(
    group_id: str, regex: str, value: ConsumerGroupRegularExpressionValue,
) -> tuple[ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue]:
    return ConsumerGroupRegularExpressionKey(group_id, regex), value


def regex_tombstone(group_id: str, regex: str) -> Tombstone:
    return ConsumerGroupRegularExpressionKey(group_id, regex), None


def member_tombstones(group_id: str, member_id: str) -> list[Tombstone]:
    """Kafka's ``removeMember``: current assignment, target, subscription (the order
    matters for replay)."""
    return [
        (ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        (ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        (ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]
