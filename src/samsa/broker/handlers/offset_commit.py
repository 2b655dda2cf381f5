"""OffsetCommit (key 8): store a group's committed offsets.

Needs READ on the group (else every partition is GROUP_AUTHORIZATION_FAILED) and on each
topic (else its partitions are TOPIC_AUTHORIZATION_FAILED).

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION without reaching the
coordinator, as in Kafka. Versions: v2-4 retention_time (-1: the broker's default); v3
throttle_time; v5 drops retention_time; v6 committed_leader_epoch; v7 group_instance_id
(a static member's commit is checked against it: FENCED_INSTANCE_ID); v8 flexible; v9 the
same layout, but a member of a KIP-848 consumer group commits with its member epoch
(STALE_MEMBER_EPOCH when it is not the member's; such a member committing below v9 gets
UNSUPPORTED_VERSION); v10 names topics by id only, in the request and the answer (Kafka
4.1+): ids are resolved to names here, so the coordinator sees names at every version, and
every partition of an id this broker does not know gets UNKNOWN_TOPIC_ID. The answer is
built typed, as v8 (names) or v10 (ids).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8 import response as v8
from kio.schema.offset_commit.v10 import response as v10
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
VERSIONS = (2, 10)
TOPIC_IDS_VERSION = 10
"""The first version naming topics by id (and no longer by name)."""


async def handle(ctx: RequestContext) -> v8.OffsetCommitResponse | v10.OffsetCommitResponse:
    body = ctx.body
    topics = ctx.broker.topics
    by_ids = ctx.version >= TOPIC_IDS_VERSION
    known: list[CommitTopic] = []
    errors: dict[tuple[str, int], int] = {}
    # (name, id, partitions) as asked; name None: an id this broker does not know
    order: list[tuple[str | None, uuid.UUID | None, list[int]]] = []
    if by_ids:  # a topic another node has just created may be missing from the view
        await topics.resolve(ids=[t.topic_id for t in body.topics if t.topic_id],
                             hold=ctx.hold)
    for t in body.topics:
        indexes = [p.partition_index for p in t.partitions]
        if by_ids:
            topic = topics.by_id(t.topic_id) if t.topic_id else None
            order.append((None if topic is None else topic.name, t.topic_id, indexes))
        else:
            order.append((t.name, None, indexes))
    group_ok = access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                    [n for n, _, _ in order if n is not None]
                                    ) if group_ok else set()
    for t, (name, _tid, _indexes) in zip(body.topics, order, strict=True):
        if name is None:
            continue  # an unknown topic id: UNKNOWN_TOPIC_ID
        parts: list[CommitPartition] = []
        for p in t.partitions:
            if name not in readable:
                errors[(name, p.partition_index)] = (
                    ErrorCode.topic_authorization_failed if group_ok
                    else ErrorCode.group_authorization_failed)
                continue
            if topics.partition(name, p.partition_index) is None:
                errors[(name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            parts.append(CommitPartition(p.partition_index, p.committed_offset,
                                         getattr(p, "committed_leader_epoch", -1),
                                         p.committed_metadata))
        if parts:
            known.append(CommitTopic(name, tuple(parts)))
    if known:
        retention = getattr(body, "retention_time", None)
        resp = await ctx.broker.groups.call(OffsetCommit(
            group_id=body.group_id, topics=tuple(known),
            generation_id=body.generation_id_or_member_epoch, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            retention_time_ms=millis(retention) if retention is not None else -1,
            api_version=ctx.version))
        assert isinstance(resp, co.OffsetCommitResponse)
        for answered in resp.topics:
            for pe in answered.partitions:
                errors[(answered.name, pe.partition)] = pe.error_code

    def error(name: str | None, index: int) -> ErrorCode:
        if not group_ok:
            return ErrorCode.group_authorization_failed
        return ErrorCode.unknown_topic_id if name is None else ErrorCode(errors[(name, index)])

    if by_ids:
        return v10.OffsetCommitResponse(throttle_time=NO_THROTTLE, topics=tuple(
            v10.OffsetCommitResponseTopic(topic_id=tid, partitions=tuple(
                v10.OffsetCommitResponsePartition(partition_index=i32(i),
                                                  error_code=error(name, i))
                for i in indexes))
            for name, tid, indexes in order))
    return v8.OffsetCommitResponse(throttle_time=NO_THROTTLE, topics=tuple(
        v8.OffsetCommitResponseTopic(name=TopicName(name or ""), partitions=tuple(
            v8.OffsetCommitResponsePartition(partition_index=i32(i), error_code=error(name, i))
            for i in indexes))
        for name, _tid, indexes in order))
