"""What every group type offers the shard.

* :class:`OffsetsGroup`, the group interface (Kafka's ``Group``): a group of any type
  (classic :class:`~.group.Group`, consumer :class:`~.consumer.group.ConsumerGroup`, share
  :class:`~.share.group.ShareGroup`) judges offset commits, fetches and deletions and its
  own deletion, says which topics it subscribes to, when its offsets expire and which
  tombstones delete it. The one offsets path (:mod:`.offsets`) and DeleteGroups
  (:mod:`.admin`) call it; its answers are values, nothing here writes.
* :class:`GroupFamily`, one group type's part of a shard (its records, APIs, timers and
  jobs): :mod:`.classic_family`, :mod:`.consumer.family`, :mod:`.share.family`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.coordinator.consumer.group import ConsumerMember
    from samsa.coordinator.jobs import Job, JobKind
    from samsa.coordinator.queries import GroupDescription, GroupSummary
    from samsa.coordinator.records import OffsetCommitValue, RecordKey
    from samsa.coordinator.timers import TimerKey, TimerKind

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

    def should_expire(self) -> bool:
        """Whether the offsets expiry sweep looks at it at all (Kafka's ``shouldExpire``:
        False for share groups, which it never deletes)."""
        ...

    def group_tombstone_keys(self) -> list[RecordKey]:
        """The keys whose tombstones delete the group (Kafka's
        ``createGroupTombstoneRecords``), in the order they are written."""
        ...


Handler = Callable[[Any, Any, object], None]


class GroupFamily(Protocol):
    """One group type's part of a shard (Kafka splits the same between
    ``GroupMetadataManager``'s per-type methods and ``GroupCoordinatorShard.replay``).

    The shard (:mod:`.shard`) holds its families side by side, in :data:`.shard.FAMILIES`:
    it routes each record to the family of its key type (the replay switch), each request
    naming a group to the family that holds the group (if that family answers the API),
    otherwise to the API's home family, each timer to the family owning its kind and each
    job to the family owning its kind. A new group type is one
    more family: the others do not change. Methods take the shard (``core``); the family
    keeps its state in it (records replay into ``core.hard``).
    """

    #: the name ListGroups and DescribeGroups show ("classic", "consumer", ...)
    group_type: str
    #: the record key types it replays (the shard's replay switch routes them here)
    key_types: tuple[type, ...]
    #: APIs it answers for a group of its own type
    handlers: Mapping[type, Handler]
    #: APIs it answers when no group of another type answers (it creates its groups there)
    home_apis: Mapping[type, Handler]
    timer_kinds: frozenset[TimerKind]
    job_kinds: frozenset[JobKind]
    #: an OffsetDelete that leaves the group empty without offsets deletes it
    removes_emptied_group: bool

    def replay(self, hard: Any, key: Any, value: Any) -> None:
        """Apply one of its records to the shard's hard state."""
        ...

    def group(self, core: Any, group_id: str) -> OffsetsGroup | None: ...

    def groups(self, core: Any) -> list[OffsetsGroup]: ...

    def summary(self, core: Any, group: Any) -> GroupSummary:
        """The group as ListGroups and the metrics see it (:mod:`.queries`)."""
        ...

    def describe(self, core: Any, group: Any) -> GroupDescription:
        """The group in detail (DescribeGroups, tests)."""
        ...

    def forget(self, core: Any, group: Any) -> None:
        """The group is being deleted: drop its live state and timers (its tombstones
        follow)."""
        ...

    def commit_accepted(self, core: Any, group: Any, check: CommitCheck) -> None:
        """An offset commit passed ``check`` (a classic member's session is renewed)."""
        ...

    def loaded(self, core: Any) -> None:
        """The shard finished loading: build live state from ``core.hard``."""
        ...

    def started(self, core: Any) -> None:
        """The shard is active: arm the loaded groups' timers."""
        ...

    def unloaded(self, core: Any) -> None:
        """The shard is given up: answer what is parked (timers are cleared by the shard)."""
        ...

    def fire(self, core: Any, key: TimerKey) -> None: ...

    def complete(self, core: Any, job: Job, outcome: object) -> None: ...
