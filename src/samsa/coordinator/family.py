"""What every group type offers the shard: the group interface the one offsets path
(:mod:`.offsets`) calls, as Kafka's ``Group`` interface does for its ``OffsetMetadataManager``.

A group of any type (classic :class:`~.group.Group`, consumer
:class:`~.consumer.group.ConsumerGroup`, and share groups next) implements
:class:`OffsetsGroup`: it judges offset commits, fetches and deletions, says which topics it
subscribes to, when its offsets expire and which tombstones delete it. Nothing here writes:
the answers are values the offsets path acts on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.coordinator.consumer.group import ConsumerMember
    from samsa.coordinator.records import OffsetCommitValue, RecordKey

E = ErrorCode


@dataclass(frozen=True)
class CommitCheck:
    """A group's answer to an offset commit (Kafka's ``validateOffsetCommit`` and the
    ``CommitPartitionValidator`` it returns): ``error`` refuses the whole commit; with
    ``member`` set, each partition must have been given to it at ``epoch`` or before
    (KIP-1251); ``renews``: the classic member whose session the commit renews."""

    error: int | None = None
    member: ConsumerMember | None = None
    epoch: int = 0
    refusal: int = E.stale_member_epoch
    renews: str | None = None

    def partition_error(self, topic_id: uuid.UUID | None, partition: int) -> int | None:
        """The error for one committed partition (``topic_id`` None: an unknown topic)."""
        if self.error is not None or self.member is None:
            return self.error
        given_at = None if topic_id is None else \
            self.member.assignment_epochs.get((topic_id, partition))
        return None if given_at is not None and given_at <= self.epoch else self.refusal

    def first_error(self, partitions: Iterable[tuple[uuid.UUID | None, int]]) -> int | None:
        """The error of the first refused partition, which refuses the whole commit."""
        if self.member is None:
            return self.error
        for topic_id, partition in partitions:
            error = self.partition_error(topic_id, partition)
            if error is not None:
                return error
        return None


ACCEPT = CommitCheck()


@dataclass(frozen=True)
class ExpirationCondition:
    """When a group's offsets expire (Kafka's ``OffsetExpirationCondition``): an offset
    with an explicit expire timestamp at that time; any other ``retention`` ms after
    ``base(offset)``. Offsets of ``kept`` topics (the group subscribes to them) never
    expire while the condition holds."""

    base: Callable[[OffsetCommitValue], int]
    kept: frozenset[str] = frozenset()

    def expired(self, topic: str, value: OffsetCommitValue, now_ms: int,
                retention_ms: int) -> bool:
        if topic in self.kept:
            return False
        if value.expire_timestamp >= 0:
            return now_ms >= value.expire_timestamp
        return now_ms - self.base(value) >= retention_ms


def commit_timestamp(value: OffsetCommitValue) -> int:
    return value.commit_timestamp


class OffsetsGroup(Protocol):
    """Kafka's ``Group`` interface, as the offsets path and DeleteGroups need it."""

    @property
    def group_id(self) -> str: ...

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int,
                               api_version: int | None) -> CommitCheck:
        """May these offsets be committed (``api_version`` None: no version floor, as for
        TxnOffsetCommit)?"""
        ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        """The error for an OffsetFetch naming a member or an epoch; None: answer it."""
        ...

    def validate_offset_delete(self) -> int | None:
        """The error for an OffsetDelete on this group; None: delete the offsets of the
        topics it is not subscribed to."""
        ...

    def validate_delete_group(self) -> int | None:
        """The error for a DeleteGroups naming this group; None: delete it."""
        ...

    def is_empty(self) -> bool: ...

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """OffsetDelete refuses a subscribed topic (GROUP_SUBSCRIBED_TO_TOPIC)."""
        ...

    def offset_expiration_condition(self) -> ExpirationCondition | None:
        """How its offsets expire now; None: they do not."""
        ...

    def group_tombstone_keys(self) -> list[RecordKey]:
        """The keys whose tombstones delete the group (Kafka's
        ``createGroupTombstoneRecords``), in the order they are written."""
        ...
