"""Heartbeat (key 12)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import Heartbeat

API_KEY = 12
VERSIONS = (0, 4)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    resp = await ctx.broker.groups.call(Heartbeat(
        group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None)))
    return ctx.respond(throttle_time=0, error_code=resp.error_code)  # type: ignore[union-attr]
