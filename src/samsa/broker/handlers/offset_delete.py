"""OffsetDelete (key 47). Partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION without
reaching the coordinator, as in Kafka; a group-level error from the coordinator replaces the
whole answer (Kafka's ``OffsetDeleteResponse.Builder.merge``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.coordinator import FetchTopic, OffsetDelete
from samsa.coordinator.responses import OffsetDeleteResponse

API_KEY = 47
VERSIONS = (0, 0)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    topics = ctx.broker.topics
    unknown = {(t.name, p.partition_index) for t in body.topics for p in t.partitions
               if topics.partition(t.name, p.partition_index) is None}
    known = tuple(FetchTopic(t.name, parts) for t in body.topics if (parts := tuple(
        p.partition_index for p in t.partitions if (t.name, p.partition_index) not in unknown)))
    resp = await ctx.broker.groups.call(OffsetDelete(body.group_id, known))
    assert isinstance(resp, OffsetDeleteResponse)
    if resp.error_code:
        return ctx.respond(throttle_time=0, error_code=resp.error_code, topics=[])
    errors = {(t.name, p.partition): p.error_code for t in resp.topics for p in t.partitions}
    errors.update(dict.fromkeys(unknown, int(ErrorCode.unknown_topic_or_partition)))
    return ctx.respond(throttle_time=0, error_code=0, topics=[
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors[(t.name, p.partition_index)]} for p in t.partitions]}
        for t in body.topics])
