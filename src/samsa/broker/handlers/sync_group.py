"""SyncGroup (key 14)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import SyncGroup
from samsa.coordinator.responses import SyncGroupResponse

API_KEY = 14
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    event = SyncGroup(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments),
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
    )
    resp = await ctx.broker.groups.call(event)
    assert isinstance(resp, SyncGroupResponse)
    return ctx.respond(throttle_time=0, error_code=resp.error_code,
                       protocol_type=resp.protocol_type, protocol_name=resp.protocol_name,
                       assignment=resp.assignment)
