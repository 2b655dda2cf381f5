"""OffsetCommit (8), OffsetFetch (9), OffsetDelete (47) and offset retention."""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from samsa.coordinator import rebalance as rb
from samsa.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from samsa.coordinator.core import ShardCore, TopicPartition
from samsa.coordinator.events import (
    NO_MEMBER_ID,
    CommitPartition,
    FetchGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
)
from samsa.coordinator.group import Group
from samsa.coordinator.members import validate_current_member
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
from samsa.coordinator.state import Answer, Do, GroupState, Request, answer, dead_answer, row

S = GroupState
E = ErrorCode
_COMMIT = row(Request.OFFSET_COMMIT)

_ErrorFor = Callable[[tuple[str, CommitPartition]], int]


def java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


# ---------------------------------------------------------------------- commit


def handle_commit(core: ShardCore, ev: OffsetCommit, token: object) -> None:
    group = core.groups.get(ev.group_id)
    if group is None:
        if ev.generation_id >= 0:
            core.reply(token, _commit_response(ev, lambda _p: E.illegal_generation))
            return
        # Not using Kafka for group management: a "simple" group.
        group = core.create_group(ev.group_id)
    cell = _COMMIT[group.state]
    error = commit_error(group, ev)
    if error is not None:
        err = error
        core.reply(token, _commit_response(ev, lambda _p: err))
        return
    if cell is Do.STORE_RENEW:
        rb.schedule_heartbeat(core, group, group.members[_member_id(group, ev)])
    core.reply(token, _commit_response(ev, lambda p: _store(core, group, ev, p)))


def commit_error(group: Group, ev: OffsetCommit) -> int | None:
    """Why ``ev``'s committer may not commit to classic ``group`` now (None: it may); also
    the check of a transactional commit (:mod:`samsa.coordinator.txn_offsets`)."""
    cell = _COMMIT[group.state]
    error = _validate_commit(group, ev, cell)
    if error is None and isinstance(cell, ErrorCode):
        error = cell
    return error


def _member_id(group: Group, ev: OffsetCommit) -> str:
    if ev.group_instance_id is not None:
        return group.static_members[ev.group_instance_id]
    return ev.member_id


def _validate_commit(group: Group, ev: OffsetCommit, cell: Answer) -> int | None:
    """Kafka's ``ClassicGroup.validateOffsetCommit``: generation < 0 on an Empty group is a
    simple consumer (accepted whatever member id it sends); otherwise member + generation."""
    if group.is_(S.DEAD):
        return dead_answer(Request.OFFSET_COMMIT)
    if ev.generation_id < 0 and cell is Do.STORE_SIMPLE:
        return None
    if (
        ev.generation_id >= 0
        or ev.member_id != NO_MEMBER_ID
        or ev.group_instance_id is not None
    ):
        error = validate_current_member(group, ev.member_id, ev.group_instance_id)
        if error is not None:
            return error
        if ev.generation_id != group.generation:
            return E.illegal_generation
        return None
    return E.unknown_member_id


def _commit_response(ev: OffsetCommit, error_for: _ErrorFor) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        tuple(
            TopicErrors(
                t.name,
                tuple(PartitionError(p.partition, error_for((t.name, p))) for p in t.partitions),
            )
            for t in ev.topics
        )
    )


def _store(
    core: ShardCore, group: Group, ev: OffsetCommit, item: tuple[str, CommitPartition]
) -> int:
    topic, p = item
    metadata = p.metadata or ""
    if java_length(metadata) > core.config.offset_metadata_max_bytes:
        return E.offset_metadata_too_large
    expire = -1 if ev.retention_time_ms == -1 else core.now_ms + ev.retention_time_ms
    value = OffsetCommitValue(p.offset, p.leader_epoch, metadata, core.now_ms, expire)
    core.write_offset(group.group_id, (topic, p.partition), value)
    return E.none


# ---------------------------------------------------------------------- fetch


def handle_fetch(core: ShardCore, ev: OffsetFetch, token: object) -> None:
    groups = tuple(fetch_group(core, g) for g in ev.groups)
    core.reply(token, OffsetFetchResponse(groups))


def fetch_group(core: ShardCore, req: FetchGroup) -> FetchedGroup:
    """Committed offsets of one group (-1 / "" for partitions without a commit)."""
    known = req.group_id in core.groups or req.group_id in core.hard.consumer.groups
    offsets = core.offsets_of(req.group_id) if known else {}
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
    group = core.groups.get(ev.group_id)
    if group is None:
        core.reply(token, OffsetDeleteResponse(E.group_id_not_found))
        return
    cell = answer(Request.OFFSET_DELETE, group.state)
    if isinstance(cell, ErrorCode):
        core.reply(token, OffsetDeleteResponse(cell))
        return
    requested = [(t.name, p) for t in ev.topics for p in t.partitions]
    errors: dict[TopicPartition, int] = {}
    if cell is Do.DELETE_OFFSETS:
        eligible = requested
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        eligible = [tp for tp in requested if not group.is_subscribed_to(tp[0])]
        errors = {tp: E.group_subscribed_to_topic for tp in requested if tp not in eligible}
    else:
        core.reply(token, OffsetDeleteResponse(E.non_empty_group))
        return
    if eligible:
        offsets = core.offsets_of(group.group_id)
        for tp in [tp for tp in dict.fromkeys(eligible) if tp in offsets]:
            core.write_offset_tombstone(group.group_id, tp)
        errors.update({tp: E.none for tp in eligible})
        maybe_remove_empty_group(core, group)
    topics = tuple(
        TopicErrors(t.name, tuple(PartitionError(p, errors[(t.name, p)]) for p in t.partitions))
        for t in ev.topics
    )
    core.reply(token, OffsetDeleteResponse(E.none, topics))


def maybe_remove_empty_group(core: ShardCore, group: Group) -> bool:
    """An Empty group without offsets becomes Dead; its metadata gets a tombstone unless it
    never had a generation (offset-only groups never wrote one)."""
    if not group.is_(S.EMPTY) or core.offsets_of(group.group_id):
        return False
    generation = group.generation
    core.remove_group(group)
    if generation > 0:
        core.write_group_tombstone(group.group_id)
    return True


# ---------------------------------------------------------------------- retention


def expire_offsets(core: ShardCore) -> None:
    """Kafka's ``cleanupGroupMetadata`` run: drop expired offsets, then dead groups."""
    retention = core.config.offsets_retention_ms
    for group in list(core.groups.values()):
        for tp in _expired(core, group, retention):
            core.write_offset_tombstone(group.group_id, tp)
        maybe_remove_empty_group(core, group)


def _expired(core: ShardCore, group: Group, retention_ms: int) -> list[TopicPartition]:
    now = core.now_ms
    offsets = core.offsets_of(group.group_id)
    subscribed: frozenset[str] = frozenset()
    if group.protocol_type is not None and group.is_(S.EMPTY):

        def base(v: OffsetCommitValue) -> int:
            if group.state_timestamp is None:
                return v.commit_timestamp
            return group.state_timestamp

    elif (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics is not None
        and group.is_(S.STABLE)
    ):
        subscribed = group.subscribed_topics

        def base(v: OffsetCommitValue) -> int:
            return v.commit_timestamp

    elif group.protocol_type is None:

        def base(v: OffsetCommitValue) -> int:
            return v.commit_timestamp

    else:
        return []
    expired = []
    for tp, value in offsets.items():
        if tp[0] in subscribed:
            continue
        if value.expire_timestamp >= 0:
            if now >= value.expire_timestamp:
                expired.append(tp)
        elif now - base(value) >= retention_ms:
            expired.append(tp)
    return expired
