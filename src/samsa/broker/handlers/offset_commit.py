"""OffsetCommit (key 8). Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION without
reaching the coordinator, as in Kafka."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.coordinator import CommitPartition, CommitTopic, OffsetCommit
from samsa.coordinator.responses import OffsetCommitResponse
from samsa.protocol.build import millis

API_KEY = 8
VERSIONS = (2, 8)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    topics = ctx.broker.topics
    known: list[CommitTopic] = []
    errors: dict[tuple[str, int], int] = {}
    order: list[tuple[str, list[int]]] = []
    for t in body.topics:
        parts: list[CommitPartition] = []
        order.append((t.name, [p.partition_index for p in t.partitions]))
        for p in t.partitions:
            if topics.partition(t.name, p.partition_index) is None:
                errors[(t.name, p.partition_index)] = int(ErrorCode.unknown_topic_or_partition)
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
            retention_time_ms=millis(retention) if retention is not None else -1))
        assert isinstance(resp, OffsetCommitResponse)
        for topic in resp.topics:
            for pe in topic.partitions:
                errors[(topic.name, pe.partition)] = pe.error_code
    return ctx.respond(throttle_time=0, topics=[
        {"name": name, "partitions": [{"partition_index": i, "error_code": errors[(name, i)]}
                                      for i in indexes]}
        for name, indexes in order])
