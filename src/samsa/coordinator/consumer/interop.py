"""Classic group APIs on consumer groups, and the shard's entry point for consumer events.

:func:`dispatch` answers ConsumerGroupHeartbeat and ConsumerGroupDescribe, and every
classic API whose group is a consumer group, as Kafka 4.0's ``GroupMetadataManager`` and
``OffsetMetadataManager`` do (:func:`complete_job` takes the outcomes of the background jobs
they ask for: target assignments, regex resolutions):

* OffsetCommit: checked by :mod:`.commits` (epoch < 0 on an empty group is an admin
  commit; otherwise the member must exist, a consumer-protocol member commit with v9+, and
  its epoch be its current one, or an older one at which it already held every partition
  it commits: KIP-1251). A commit is not a heartbeat here.
* OffsetFetch v9+: a member id and its exact current epoch (:mod:`.commits`).
* OffsetDelete: allowed in any state; GROUP_SUBSCRIBED_TO_TOPIC for subscribed topics.
* DeleteGroups: NON_EMPTY_GROUP unless Empty; offsets then the group get tombstones.
* DescribeGroups and ListGroups are answered by :mod:`samsa.coordinator.admin` from the
  views of :mod:`samsa.coordinator.queries`, which cover both group types: a consumer
  group is described as Dead (from v6 GROUP_ID_NOT_FOUND, "is not a classic group"), and
  listed with type and protocol type ``consumer``.
* JoinGroup: an Empty consumer group is deleted and the join creates a classic group; a
  live one takes the member in as a classic member (:mod:`.classic_members`).
* SyncGroup, Heartbeat: answered for classic members (:mod:`.classic_members`);
  UNKNOWN_MEMBER_ID for others. LeaveGroup removes classic members, and any member by
  instance id (admin removal); a consumer-protocol member id gets UNKNOWN_MEMBER_ID. When
  only classic members remain, the group becomes classic again (:mod:`.migrate`).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from samsa.coordinator.consumer import (
    batching,
    classic_members,
    commits,
    describe,
    heartbeat,
    regex_refresh,
)
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.consumer.records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import (
    NO_MEMBER_ID,
    CommitPartition,
    ConsumerGroupDescribe,
    ConsumerGroupHeartbeat,
    DeleteGroups,
    DescribeGroups,
    Event,
    FetchGroup,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    SyncGroup,
)
from samsa.coordinator.jobs import Job, JobKind
from samsa.coordinator.offsets import fetch_group, java_length
from samsa.coordinator.records import OffsetCommitValue
from samsa.coordinator.responses import (
    DeletedGroup,
    DeleteGroupsResponse,
    FetchedGroup,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionError,
    TopicErrors,
)

E = ErrorCode


def dispatch(core: ShardCore, event: Event, token: object) -> bool:
    """Handle ``event`` if it is a consumer-group matter; False leaves it to the classic
    handlers."""
    if isinstance(event, ConsumerGroupHeartbeat):
        heartbeat.handle_heartbeat(core, event, token)
        return True
    if isinstance(event, ConsumerGroupDescribe):
        describe.handle_describe(core, event, token)
        return True
    groups = core.hard.consumer.groups
    if isinstance(event, OffsetFetch):
        if len(event.groups) != 1 or event.groups[0].group_id not in groups:
            return False
        core.reply(token, OffsetFetchResponse((_fetch(core, groups[event.groups[0].group_id],
                                                      event.groups[0]),)))
        return True
    if isinstance(event, DeleteGroups):
        if len(event.groups) != 1 or event.groups[0] not in groups:
            return False
        core.reply(token, DeleteGroupsResponse((_delete(core, groups[event.groups[0]]),)))
        return True
    if isinstance(event, DescribeGroups | ListGroups | ShareGroupDescribe | ShareGroupHeartbeat):
        return False  # samsa.coordinator.admin answers every group type; shares are theirs
    found = groups.get(event.group_id)
    if found is None:
        return False
    group = found
    if isinstance(event, OffsetCommit):
        _commit(core, group, event, token)
    elif isinstance(event, OffsetDelete):
        _offset_delete(core, group, event, token)
    elif isinstance(event, JoinGroup):
        if not group.is_empty():
            classic_members.join(core, group, event, token)
            return True
        delete_group_records(core, group)
        return False
    elif isinstance(event, SyncGroup):
        classic_members.sync(core, group, event, token)
    elif isinstance(event, Heartbeat):
        classic_members.heartbeat(core, group, event, token)
    elif isinstance(event, LeaveGroup):
        _leave(core, group, event, token)
    else:
        return False
    return True


# ---------------------------------------------------------------------- background jobs


def complete_job(core: ShardCore, job: Job, outcome: object) -> None:
    """The job the shard awaited finished (:mod:`samsa.coordinator.jobs`)."""
    if job.kind is JobKind.TARGET_ASSIGNMENT:
        batching.target_done(core, job, outcome)
        return
    group = core.hard.consumer.groups.get(job.group_id)
    if group is None:
        return
    if regex_refresh.resolved(core, group, job, outcome):
        heartbeat.bump_epoch(core, group, True)
    batching.request_target(core, group)


# ---------------------------------------------------------------------- offsets


def _commit(core: ShardCore, group: ConsumerGroup, ev: OffsetCommit, token: object) -> None:
    check = commits.validate_offset_commit(group, ev.member_id, ev.generation_id,
                                           ev.api_version)
    max_metadata = core.config.offset_metadata_max_bytes
    by_name = core.topics.by_name

    def topic_id(name: str) -> uuid.UUID | None:
        info = by_name.get(name)
        return None if info is None else info.topic_id

    # Kafka validates the partitions whose metadata fits, in order; one refusal refuses all.
    error = check.first_error(
        (topic_id(t.name), p.partition) for t in ev.topics for p in t.partitions
        if java_length(p.metadata or "") <= max_metadata)

    def answer(topic: str, p: CommitPartition) -> int:
        if error is not None:
            return error
        metadata = p.metadata or ""
        if java_length(metadata) > max_metadata:
            return E.offset_metadata_too_large
        expire = -1 if ev.retention_time_ms == -1 else core.now_ms + ev.retention_time_ms
        value = OffsetCommitValue(p.offset, p.leader_epoch, metadata, core.now_ms, expire)
        core.write_offset(group.group_id, (topic, p.partition), value)
        return E.none

    core.reply(token, OffsetCommitResponse(tuple(
        TopicErrors(t.name, tuple(PartitionError(p.partition, answer(t.name, p))
                                  for p in t.partitions))
        for t in ev.topics
    )))


def _fetch(core: ShardCore, group: ConsumerGroup, req: FetchGroup) -> FetchedGroup:
    """:func:`.commits.validate_offset_fetch`, then the committed offsets."""
    error = commits.validate_offset_fetch(group, req.member_id, req.member_epoch)
    if error is not None:
        return FetchedGroup(req.group_id, (), error)
    return fetch_group(core, req)


def _offset_delete(core: ShardCore, group: ConsumerGroup, ev: OffsetDelete,
                   token: object) -> None:
    subscribed = group.subscribed_topic_names()
    offsets = core.offsets_of(group.group_id)
    topics = []
    for t in ev.topics:
        errors = []
        for p in t.partitions:
            if t.name in subscribed:
                errors.append(PartitionError(p, E.group_subscribed_to_topic))
                continue
            if (t.name, p) in offsets:
                core.write_offset_tombstone(group.group_id, (t.name, p))
            errors.append(PartitionError(p, E.none))
        topics.append(TopicErrors(t.name, tuple(errors)))
    core.reply(token, OffsetDeleteResponse(E.none, tuple(topics)))


# ---------------------------------------------------------------------- groups


def _delete(core: ShardCore, group: ConsumerGroup) -> DeletedGroup:
    if not group.is_empty():
        return DeletedGroup(group.group_id, E.non_empty_group)
    for tp in list(core.offsets_of(group.group_id)):
        core.write_offset_tombstone(group.group_id, tp)
    delete_group_records(core, group)
    return DeletedGroup(group.group_id, E.none)


def delete_group_records(core: ShardCore, group: ConsumerGroup) -> None:
    """Tombstones for an empty consumer group (Kafka's ``createGroupTombstoneRecords``);
    the epoch tombstone comes last and removes the group."""
    gid = group.group_id
    for mid in list(group.target):
        core.write(ConsumerGroupTargetAssignmentMemberKey(gid, mid), None)
    core.write(ConsumerGroupTargetAssignmentMetadataKey(gid), None)
    for regex in list(group.regexes):
        core.write(ConsumerGroupRegularExpressionKey(gid, regex), None)
    core.write(ConsumerGroupMetadataKey(gid), None)
    core.cancel_group_timers(gid)


def _leave(core: ShardCore, group: ConsumerGroup, ev: LeaveGroup, token: object) -> None:
    answers = []
    fenced: list[str] = []
    for m in ev.members:
        if m.group_instance_id is None:
            member = group.members.get(m.member_id)
            member_id = m.member_id
            if member is None or member.classic is None:
                error = E.unknown_member_id
            else:
                error = E.none
                if member_id not in fenced:
                    fenced.append(member_id)
        else:
            static = group.static_member(m.group_instance_id)
            if static is None:
                error, member_id = E.unknown_member_id, m.member_id
            elif m.member_id != NO_MEMBER_ID and m.member_id != static.member_id:
                error, member_id = E.fenced_instance_id, m.member_id
            elif m.member_id != NO_MEMBER_ID and static.classic is None:
                # the member exists but uses the consumer protocol
                error, member_id = E.unknown_member_id, m.member_id
            else:
                error, member_id = E.none, static.member_id
                if member_id not in fenced:
                    fenced.append(member_id)
        answers.append(LeaveGroupMemberResponse(member_id, m.group_instance_id, error))
    if fenced:
        heartbeat.fence_members(core, group, fenced)
    core.reply(token, LeaveGroupResponse(E.none, tuple(answers)))


# ---------------------------------------------------------------------- retention


def expire_offsets(core: ShardCore) -> None:
    """Kafka's ``cleanupGroupMetadata`` for consumer groups: offsets of topics the group
    does not subscribe to expire ``offsets.retention.minutes`` after their commit (or at
    their explicit expiry); an empty group without offsets is deleted."""
    retention = core.config.offsets_retention_ms
    now = core.now_ms
    for group in list(core.hard.consumer.groups.values()):
        subscribed = group.subscribed_topic_names()
        offsets = core.offsets_of(group.group_id)
        for tp, value in list(offsets.items()):
            if tp[0] in subscribed:
                continue
            if (now >= value.expire_timestamp if value.expire_timestamp >= 0
                    else now - value.commit_timestamp >= retention):
                core.write_offset_tombstone(group.group_id, tp)
        if group.is_empty() and not core.offsets_of(group.group_id):
            delete_group_records(core, group)
