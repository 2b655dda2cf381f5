"""ListGroups (key 16), with the state filter of v4 and the type filter of v5 (each group's
type, ``classic`` or ``consumer``, is in v5 answers)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import ListGroups
from samsa.coordinator.responses import ListGroupsResponse

API_KEY = 16
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> Any:
    states = tuple(getattr(ctx.body, "states_filter", ()) or ())
    types = tuple(getattr(ctx.body, "types_filter", ()) or ())
    resp = await ctx.broker.groups.call(ListGroups(states, types))
    assert isinstance(resp, ListGroupsResponse)
    return ctx.respond(throttle_time=0, error_code=resp.error_code, groups=[
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
         "group_type": g.group_type}
        for g in resp.groups])
