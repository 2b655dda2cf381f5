"""The records of classic groups and committed offsets, made from the coordinator's values
(Kafka's ``GroupCoordinatorRecordHelpers``): pure, each a ``(key, value)`` pair for
:meth:`~.core.ShardCore.write`, a tombstone's value ``None``. The consumer group's are in
:mod:`.consumer.record_factory`."""

from __future__ import annotations

from samsa.coordinator.group import Group
from samsa.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)

TopicPartition = tuple[str, int]


def group_metadata(group: Group,
                   assignments: dict[str, bytes]) -> tuple[GroupMetadataKey, GroupMetadataValue]:
    return GroupMetadataKey(group.group_id), group.to_record(assignments)


def group_tombstone(group_id: str) -> tuple[GroupMetadataKey, None]:
    return GroupMetadataKey(group_id), None


def offset_commit(group_id: str, tp: TopicPartition,
                  value: OffsetCommitValue) -> tuple[OffsetCommitKey, OffsetCommitValue]:
    return OffsetCommitKey(group_id, tp[0], tp[1]), value


def offset_tombstone(group_id: str, tp: TopicPartition) -> tuple[OffsetCommitKey, None]:
    return OffsetCommitKey(group_id, tp[0], tp[1]), None
