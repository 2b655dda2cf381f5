"""DescribeGroups (key 15)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import DescribeGroups
from samsa.coordinator.responses import DescribeGroupsResponse

API_KEY = 15
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> Any:
    resp = await ctx.broker.groups.call(DescribeGroups(tuple(ctx.body.groups)))
    assert isinstance(resp, DescribeGroupsResponse)
    return ctx.respond(throttle_time=0, groups=[
        {"error_code": g.error_code, "group_id": g.group_id, "group_state": g.state,
         "protocol_type": g.protocol_type, "protocol_data": g.protocol_data,
         "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                      "client_id": m.client_id, "client_host": m.client_host,
                      "member_metadata": m.metadata, "member_assignment": m.assignment}
                     for m in g.members],
         "authorized_operations": -2147483648}
        for g in resp.groups])
