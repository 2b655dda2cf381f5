"""SyncGroup (key 14): the leader hands in the assignment; every member gets its own.

Versions: v1 throttle_time; v3 group_instance_id (static membership); v4 flexible; v5
protocol_type and protocol_name in both directions (checked against the group's, else
INCONSISTENT_GROUP_PROTOCOL). The answer is built as v5, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.sync_group.v5.response import SyncGroupResponse

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import SyncGroup
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> SyncGroupResponse:
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
    resp = await access.call_group(ctx, event, AclOperation.READ)
    assert isinstance(resp, co.SyncGroupResponse)
    return SyncGroupResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode(resp.error_code),
                             protocol_type=resp.protocol_type,
                             protocol_name=resp.protocol_name, assignment=resp.assignment)
