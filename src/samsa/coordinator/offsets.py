"""OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), offset retention and group
deletion: one path for every group type, asking the group (the interface of
:mod:`.family`, as Kafka's ``OffsetMetadataManager`` asks its ``Group``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from samsa.coordinator import rebalance as rb
from samsa.coordinator import record_factory as records
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import (
    CommitPartition,
    FetchGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
)
from samsa.coordinator.family import GroupFamily, OffsetsGroup
from samsa.coordinator.records import OffsetCommitValue
from samsa.coordinator.responses import (
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionError,
    TopicErrors,
)

E = ErrorCode


def java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


# ---------------------------------------------------------------------- commit


def handle_commit(core: ShardCore, ev: OffsetCommit, token: object) -> None:
    """The group judges the commit; Kafka validates the partitions whose metadata fits, in
    order, and one refusal refuses them all."""
    found = core.find_group(ev.group_id)
    if found is None:
        if ev.generation_id >= 0:
            _reply_commit(core, token, ev, lambda _t, _p: E.illegal_generation)
            return
        # Not using Kafka for group management: a "simple" (classic) group.
        rb.create_group(core, ev.group_id)
        found = core.find_group(ev.group_id)
        assert found is not None
    family, group = found
    check = group.validate_offset_commit(ev.member_id, ev.group_instance_id, ev.generation_id,
                                         ev.api_version)
    max_metadata = core.config.offset_metadata_max_bytes
    by_name = core.topics.by_name

    def topic_id(name: str) -> uuid.UUID | None:
        info = by_name.get(name)
        return None if info is None else info.topic_id

    error = check.first_error(
        (topic_id(t.name), p.partition) for t in ev.topics for p in t.partitions
        if java_length(p.metadata or "") <= max_metadata)
    if error is not None:
        refused = error
        _reply_commit(core, token, ev, lambda _t, _p: refused)
        return
    family.commit_accepted(core, group, check)

    def store(topic: str, p: CommitPartition) -> int:
        metadata = p.metadata or ""
        if java_length(metadata) > max_metadata:
            return E.offset_metadata_too_large
        expire = -1 if ev.retention_time_ms == -1 else core.now_ms + ev.retention_time_ms
        value = OffsetCommitValue(p.offset, p.leader_epoch, metadata, core.now_ms, expire)
        core.write(*records.offset_commit(group.group_id, (topic, p.partition), value))
        return E.none

    _reply_commit(core, token, ev, store)


def _reply_commit(core: ShardCore, token: object, ev: OffsetCommit,
                  answer: Callable[[str, CommitPartition], int]) -> None:
    core.reply(token, OffsetCommitResponse(tuple(
        TopicErrors(t.name, tuple(PartitionError(p.partition, answer(t.name, p))
                                  for p in t.partitions))
        for t in ev.topics
    )))


# ---------------------------------------------------------------------- fetch


def handle_fetch(core: ShardCore, ev: OffsetFetch, token: object) -> None:
    groups = tuple(fetch_group(core, g) for g in ev.groups)
    core.reply(token, OffsetFetchResponse(groups))


def fetch_group(core: ShardCore, req: FetchGroup) -> FetchedGroup:
    """Committed offsets of one group (-1 / "" for partitions without a commit), once the
    group accepts the member and epoch the request names."""
    found = core.find_group(req.group_id)
    if found is not None:
        error = found[1].validate_offset_fetch(req.member_id, req.member_epoch)
        if error is not None:
            return FetchedGroup(req.group_id, (), error)
    offsets = core.offsets_of(req.group_id) if found is not None else {}
    if req.topics is None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(offsets):
            by_topic.setdefault(topic, []).append(partition)
        wanted = [(t, tuple(ps)) for t, ps in by_topic.items()]
    else:
        wanted = [(t.name, t.partitions) for t in req.topics]
    topics = []
    for topic, partitions in wanted:
        fetched = []
        for partition in partitions:
            value = offsets.get((topic, partition))
            if value is None:
                fetched.append(FetchedPartition(partition))
            else:
                fetched.append(
                    FetchedPartition(partition, value.offset, value.leader_epoch, value.metadata)
                )
        topics.append(FetchedTopic(topic, tuple(fetched)))
    return FetchedGroup(req.group_id, tuple(topics))


# ---------------------------------------------------------------------- delete


def handle_offset_delete(core: ShardCore, ev: OffsetDelete, token: object) -> None:
    """Kafka's ``OffsetMetadataManager.deleteOffsets``: the group must allow it; offsets of
    topics it subscribes to stay (GROUP_SUBSCRIBED_TO_TOPIC)."""
    found = core.find_group(ev.group_id)
    if found is None:
        core.reply(token, OffsetDeleteResponse(E.group_id_not_found))
        return
    family, group = found
    error = group.validate_offset_delete()
    if error is not None:
        core.reply(token, OffsetDeleteResponse(error))
        return
    offsets = core.offsets_of(group.group_id)
    deleted = False
    topics = []
    for t in ev.topics:
        subscribed = group.is_subscribed_to_topic(t.name)
        errors = []
        for p in t.partitions:
            if subscribed:
                errors.append(PartitionError(p, E.group_subscribed_to_topic))
                continue
            if (t.name, p) in offsets:
                core.write(*records.offset_tombstone(group.group_id, (t.name, p)))
            deleted = True
            errors.append(PartitionError(p, E.none))
        topics.append(TopicErrors(t.name, tuple(errors)))
    if deleted and family.removes_emptied_group:
        delete_if_empty(core, family, group)
    core.reply(token, OffsetDeleteResponse(E.none, tuple(topics)))


# ---------------------------------------------------------------------- groups


def delete_all_offsets(core: ShardCore, group_id: str) -> None:
    for tp in list(core.offsets_of(group_id)):
        core.write(*records.offset_tombstone(group_id, tp))


def delete_group(core: ShardCore, family: GroupFamily, group: OffsetsGroup) -> None:
    """The group's live state goes, then its tombstones are written (the one place)."""
    keys = group.group_tombstone_keys()
    family.forget(core, group)
    for key in keys:
        core.write(key, None)


def delete_if_empty(core: ShardCore, family: GroupFamily, group: OffsetsGroup) -> bool:
    """An empty group without offsets is deleted (Kafka's ``cleanupGroupMetadata``)."""
    if not group.is_empty() or core.offsets_of(group.group_id):
        return False
    delete_group(core, family, group)
    return True


# ---------------------------------------------------------------------- retention


def expire_offsets(core: ShardCore) -> None:
    """Kafka's ``cleanupGroupMetadata`` run over every group that should expire: drop the
    offsets its expiration condition says expired, then delete it if it is empty without
    offsets."""
    retention = core.config.offsets_retention_ms
    now = core.now_ms
    for family in core.families:
        for group in family.groups(core):
            if not group.should_expire():
                continue
            condition = group.offset_expiration_condition()
            if condition is not None:
                offsets = core.offsets_of(group.group_id)
                for tp in [tp for tp, v in offsets.items()
                           if condition.expired(tp[0], v, now, retention)]:
                    core.write(*records.offset_tombstone(group.group_id, tp))
            delete_if_empty(core, family, group)
