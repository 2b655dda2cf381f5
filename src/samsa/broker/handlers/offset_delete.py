"""OffsetDelete (key 47)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import FetchTopic, OffsetDelete
from samsa.coordinator.responses import OffsetDeleteResponse

API_KEY = 47
VERSIONS = (0, 0)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    event = OffsetDelete(body.group_id, tuple(
        FetchTopic(t.name, tuple(p.partition_index for p in t.partitions)) for t in body.topics))
    resp = await ctx.broker.groups.call(event)
    assert isinstance(resp, OffsetDeleteResponse)
    return ctx.respond(throttle_time=0, error_code=resp.error_code, topics=[
        {"name": t.name, "partitions": [{"partition_index": p.partition,
                                         "error_code": p.error_code} for p in t.partitions]}
        for t in resp.topics])
