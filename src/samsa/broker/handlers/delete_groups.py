"""DeleteGroups (key 42)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import DeleteGroups
from samsa.coordinator.responses import DeleteGroupsResponse

API_KEY = 42
VERSIONS = (0, 2)


async def handle(ctx: RequestContext) -> Any:
    resp = await ctx.broker.groups.call(DeleteGroups(tuple(ctx.body.groups_names)))
    assert isinstance(resp, DeleteGroupsResponse)
    return ctx.respond(throttle_time=0, results=[
        {"group_id": g.group_id, "error_code": g.error_code} for g in resp.groups])
