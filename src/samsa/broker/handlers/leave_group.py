"""LeaveGroup (key 13): one member (v0-2) or a batch, by member or instance id (v3+)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import LeaveGroup, LeavingMember
from samsa.coordinator.responses import LeaveGroupResponse

API_KEY = 13
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    if ctx.version >= 3:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id,
                                      getattr(m, "reason", None)) for m in body.members)
    else:
        members = (LeavingMember(body.member_id),)
    resp = await ctx.broker.groups.call(LeaveGroup(body.group_id, members))
    assert isinstance(resp, LeaveGroupResponse)
    if ctx.version < 3:
        code = resp.error_code or (resp.members[0].error_code if resp.members else 0)
        return ctx.respond(throttle_time=0, error_code=code)
    return ctx.respond(throttle_time=0, error_code=resp.error_code, members=[
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
         "error_code": m.error_code} for m in resp.members])
