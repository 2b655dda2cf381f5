"""JoinGroup (key 11): a classic group member joins or rejoins, and learns the generation.

Versions: v1 rebalance_timeout (v0 uses the session timeout); v2 throttle_time; v4 a new
dynamic member first gets MEMBER_ID_REQUIRED with its id and joins again; v5
group_instance_id (static membership); v6 flexible; v7 protocol_type in the response and
protocol_name nullable (v0-6 send "" for null); v8 reason; v9 skip_assignment (a static
leader rejoining a Stable group keeps its assignment). The answer is built as v9, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import JoinGroup
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, millis
from samsa.security.acl import AclOperation

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = (0, 9)


async def handle(ctx: RequestContext) -> JoinGroupResponse:
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
    resp = await access.call_group(ctx, event, AclOperation.READ)
    assert isinstance(resp, co.JoinGroupResponse)
    protocol_name = resp.protocol_name
    if v < 7 and protocol_name is None:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(resp.error_code),
        generation_id=i32(resp.generation_id),
        protocol_type=resp.protocol_type,
        protocol_name=protocol_name,
        leader=resp.leader,
        skip_assignment=resp.skip_assignment,
        member_id=resp.member_id,
        members=tuple(JoinGroupResponseMember(member_id=m.member_id,
                                              group_instance_id=m.group_instance_id,
                                              metadata=m.metadata) for m in resp.members),
    )
