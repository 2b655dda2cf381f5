"""JoinGroup (key 11)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import JoinGroup
from samsa.coordinator.responses import JoinGroupResponse
from samsa.protocol.build import millis

API_KEY = 11
VERSIONS = (0, 9)


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    v = ctx.version
    session = millis(body.session_timeout)
    event = JoinGroup(
        group_id=body.group_id,
        member_id=body.member_id,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        session_timeout_ms=session,
        rebalance_timeout_ms=millis(body.rebalance_timeout) if v >= 1 else session,
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=ctx.request.client_id or "",
        client_host=ctx.client_host,
        reason=getattr(body, "reason", None),
        require_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9,
    )
    resp = await ctx.broker.groups.call(event)
    assert isinstance(resp, JoinGroupResponse)
    protocol_name = resp.protocol_name
    if v < 7 and protocol_name is None:
        protocol_name = ""
    return ctx.respond(
        throttle_time=0,
        error_code=resp.error_code,
        generation_id=resp.generation_id,
        protocol_type=resp.protocol_type,
        protocol_name=protocol_name,
        leader=resp.leader,
        skip_assignment=resp.skip_assignment,
        member_id=resp.member_id,
        members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                  "metadata": m.metadata} for m in resp.members],
    )
