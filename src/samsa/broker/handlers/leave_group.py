"""LeaveGroup (key 13): members leave a classic group (a rebalance follows).

Versions: v1 throttle_time; v3 a batch of members, each by member id or
group_instance_id, with an error per member (v0-2: one member id, whose error is the
top-level error); v4 flexible; v5 a reason per member. The answer is built as v5, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.leave_group.v5.response import LeaveGroupResponse, MemberResponse

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import LeaveGroup, LeavingMember
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> LeaveGroupResponse:
    body = ctx.body
    if ctx.version >= 3:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id,
                                      getattr(m, "reason", None)) for m in body.members)
    else:
        members = (LeavingMember(body.member_id),)
    resp = await access.call_group(ctx, LeaveGroup(body.group_id, members),
                                   AclOperation.READ)
    assert isinstance(resp, co.LeaveGroupResponse)
    if ctx.version < 3:
        code = resp.error_code or (resp.members[0].error_code if resp.members else ErrorCode.none)
        return LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode(code),
                                  members=())
    return LeaveGroupResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode(resp.error_code),
        members=tuple(MemberResponse(member_id=m.member_id,
                                     group_instance_id=m.group_instance_id,
                                     error_code=ErrorCode(m.error_code)) for m in resp.members))
