"""DescribeShareGroupOffsets (key 90, v0-v1): each share partition's start offset (SPSO)
and, from v1 (KIP-1226), its lag: the records between SPSO and the high watermark that are
not yet acknowledged or archived. A partition the group never read answers start offset -1
(and lag -1); topics null means every partition the group has share state for.

Sent to the group's coordinator (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS otherwise);
a group that is not a share group is GROUP_ID_NOT_FOUND. Needs DESCRIBE on the group (else
GROUP_AUTHORIZATION_FAILED) and on each topic (else TOPIC_AUTHORIZATION_FAILED). Built as v1,
typed.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.describe_share_group_offsets.v1 import response as wire
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.broker.topics import Topic
from samsa.coordinator.events import ShareGroupOffsetsChange
from samsa.coordinator.responses import ShareGroupOffsetsChangeResponse
from samsa.coordinator.share.group import SHARE_GROUP_TYPE
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.share.stats import share_lag

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
VERSIONS = (0, 1)


def group_refusal(ctx: RequestContext, group_id: str,
                  op: AclOperation) -> tuple[ErrorCode, str | None] | None:
    """Why the share-group offsets APIs refuse ``group_id``: ``op`` on the group is not
    allowed, this node is not its coordinator, or it is not a share group."""
    if not access.allowed(ctx, op, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    groups = ctx.broker.groups
    status = groups.coordinator_error(group_id)
    if status != ErrorCode.none:
        return ErrorCode(status), None
    summary = None if groups.coordinator is None else groups.coordinator.group_summary(group_id)
    if summary is None or summary.group_type != SHARE_GROUP_TYPE:
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    return None


async def change_refusal(ctx: RequestContext, group_id: str,
                         create: bool) -> tuple[ErrorCode, str | None] | None:
    """Why Alter/DeleteShareGroupOffsets refuse ``group_id`` (READ on the group, its
    coordinator, a share group without members: the coordinator's
    :class:`~samsa.coordinator.events.ShareGroupOffsetsChange`, which with ``create``
    creates a missing group, empty)."""
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    status = ctx.broker.groups.coordinator_error(group_id)
    if status != ErrorCode.none:
        return ErrorCode(status), None
    resp = await ctx.broker.groups.call(ShareGroupOffsetsChange(group_id, create))
    assert isinstance(resp, ShareGroupOffsetsChangeResponse)
    if resp.error_code != ErrorCode.none:
        return ErrorCode(resp.error_code), resp.error_message
    return None


def _partition(ctx: RequestContext, group_id: str, topic: Topic,
               index: int) -> wire.DescribeShareGroupOffsetsResponsePartition:
    part = ctx.broker.topics.partition(topic.name, index)
    if part is None:
        return wire.DescribeShareGroupOffsetsResponsePartition(
            partition_index=i32(index), start_offset=i64(-1), leader_epoch=i32(-1),
            error_code=ErrorCode.unknown_topic_or_partition)
    state = ctx.broker.shares.state(group_id, topic.topic_id, index)
    _, epoch = leadership.leader(ctx.broker, part)
    if state is None:
        return wire.DescribeShareGroupOffsetsResponsePartition(
            partition_index=i32(index), start_offset=i64(-1), leader_epoch=i32(epoch),
            lag=i64(-1), error_code=ErrorCode.none)
    lag = share_lag(state, ctx.broker.shares.log_end(topic.topic_id, part))
    return wire.DescribeShareGroupOffsetsResponsePartition(
        partition_index=i32(index), start_offset=i64(state.start_offset),
        leader_epoch=i32(epoch), lag=i64(lag), error_code=ErrorCode.none)


def _topics(ctx: RequestContext, group_id: str,
            wanted: Any) -> tuple[wire.DescribeShareGroupOffsetsResponseTopic, ...]:
    topics = ctx.broker.topics
    named: list[tuple[str, Topic | None, list[int]]]
    if wanted is None:  # every partition the group has share state for
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in ctx.broker.shares.partitions_of(group_id):
            by_topic.setdefault(topic_id, []).append(index)
        requested = [(topics.by_id(t), sorted(ps)) for t, ps in by_topic.items()]
        named = [(t.name, t, ps) for t, ps in requested if t is not None]
    else:
        named = [(str(t.topic_name), topics.get(str(t.topic_name)),
                  [int(p) for p in t.partitions]) for t in wanted]
    out = []
    for name, topic, partitions in named:
        if topic is None or not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                               name):
            code = (ErrorCode.unknown_topic_or_partition if topic is None
                    else ErrorCode.topic_authorization_failed)
            parts = tuple(wire.DescribeShareGroupOffsetsResponsePartition(
                partition_index=i32(p), start_offset=i64(-1), leader_epoch=i32(-1),
                error_code=code) for p in partitions)
            out.append(wire.DescribeShareGroupOffsetsResponseTopic(
                topic_name=TopicName(name), topic_id=None, partitions=parts))
            continue
        out.append(wire.DescribeShareGroupOffsetsResponseTopic(
            topic_name=TopicName(name), topic_id=topic.topic_id,
            partitions=tuple(_partition(ctx, group_id, topic, p) for p in partitions)))
    return tuple(out)


async def handle(ctx: RequestContext) -> wire.DescribeShareGroupOffsetsResponse:
    ctx.hold()  # in order: reads after a cluster's refresh
    groups = []
    for g in ctx.body.groups:
        error = group_refusal(ctx, str(g.group_id), AclOperation.DESCRIBE)
        if error is not None:
            groups.append(wire.DescribeShareGroupOffsetsResponseGroup(
                group_id=GroupId(g.group_id), topics=(), error_code=error[0],
                error_message=error[1]))
            continue
        await ctx.broker.shares.refresh(str(g.group_id))  # a cluster: states led elsewhere
        groups.append(wire.DescribeShareGroupOffsetsResponseGroup(
            group_id=GroupId(g.group_id), topics=_topics(ctx, str(g.group_id), g.topics),
            error_code=ErrorCode.none))
    return wire.DescribeShareGroupOffsetsResponse(throttle_time=NO_THROTTLE,
                                                  groups=tuple(groups))
