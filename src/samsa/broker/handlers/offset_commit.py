"""OffsetCommit (key 8): store a group's committed offsets.

Needs READ on the group (else every partition is GROUP_AUTHORIZATION_FAILED) and on each
topic (else its partitions are TOPIC_AUTHORIZATION_FAILED).

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION without reaching the
coordinator, as in Kafka. Versions: v2-4 retention_time (-1: the broker's default); v3
throttle_time; v5 drops retention_time; v6 committed_leader_epoch; v7 group_instance_id
(a static member's commit is checked against it: FENCED_INSTANCE_ID); v8 flexible; v9 the
same layout, but a member of a KIP-848 consumer group commits with its member epoch
(STALE_MEMBER_EPOCH when it is not the member's; such a member committing below v9 gets
UNSUPPORTED_VERSION). The answer is built as v8, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import CommitPartition, CommitTopic, OffsetCommit
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, millis
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = (2, 9)


async def handle(ctx: RequestContext) -> OffsetCommitResponse:
    body = ctx.body
    topics = ctx.broker.topics
    known: list[CommitTopic] = []
    errors: dict[tuple[str, int], int] = {}
    order: list[tuple[str, list[int]]] = []
    group_ok = access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                    [t.name for t in body.topics]) if group_ok else set()
    for t in body.topics:
        parts: list[CommitPartition] = []
        order.append((t.name, [p.partition_index for p in t.partitions]))
        for p in t.partitions:
            if t.name not in readable:
                errors[(t.name, p.partition_index)] = (
                    ErrorCode.topic_authorization_failed if group_ok
                    else ErrorCode.group_authorization_failed)
                continue
            if topics.partition(t.name, p.partition_index) is None:
                errors[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            parts.append(CommitPartition(p.partition_index, p.committed_offset,
                                         getattr(p, "committed_leader_epoch", -1),
                                         p.committed_metadata))
        if parts:
            known.append(CommitTopic(t.name, tuple(parts)))
    if known:
        retention = getattr(body, "retention_time", None)
        resp = await ctx.broker.groups.call(OffsetCommit(
            group_id=body.group_id, topics=tuple(known),
            generation_id=body.generation_id_or_member_epoch, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            retention_time_ms=millis(retention) if retention is not None else -1,
            api_version=ctx.version))
        assert isinstance(resp, co.OffsetCommitResponse)
        for topic in resp.topics:
            for pe in topic.partitions:
                errors[(topic.name, pe.partition)] = pe.error_code
    return OffsetCommitResponse(throttle_time=NO_THROTTLE, topics=tuple(
        OffsetCommitResponseTopic(name=TopicName(name), partitions=tuple(
            OffsetCommitResponsePartition(partition_index=i32(i),
                                          error_code=ErrorCode(errors[(name, i)]))
            for i in indexes))
        for name, indexes in order))
