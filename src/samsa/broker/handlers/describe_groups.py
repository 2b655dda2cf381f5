"""DescribeGroups (key 15): state, protocol and members of classic groups.

Needs DESCRIBE on each group (else that group is GROUP_AUTHORIZATION_FAILED); v3+
authorized_operations are the operations the caller may do on the group.

Versions: v1 throttle_time; v3 include_authorized_operations and authorized_operations;
v4 each member's group_instance_id; v5 flexible; v6 (KIP-1043) error_message, and a group
that is absent or not classic is GROUP_ID_NOT_FOUND ("Group g not found.", "Group g is not
a classic group.") instead of a Dead group without an error. The answer is built as v6, typed.
"""

from __future__ import annotations

from kio.schema.describe_groups.v6.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import DescribeGroups
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = (0, 6)


async def handle(ctx: RequestContext) -> DescribeGroupsResponse:
    resp = await access.call_group(ctx, DescribeGroups(tuple(ctx.body.groups), ctx.version),
                                   AclOperation.DESCRIBE)
    assert isinstance(resp, co.DescribeGroupsResponse)
    with_ops = bool(getattr(ctx.body, "include_authorized_operations", False))
    return DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=tuple(
        DescribedGroup(error_code=ErrorCode(g.error_code), error_message=g.error_message,
                       group_id=GroupId(g.group_id),
                       group_state=g.state, protocol_type=g.protocol_type,
                       protocol_data=g.protocol_data, members=tuple(
                           DescribedGroupMember(member_id=m.member_id,
                                                group_instance_id=m.group_instance_id,
                                                client_id=m.client_id, client_host=m.client_host,
                                                member_metadata=m.metadata,
                                                member_assignment=m.assignment)
                           for m in g.members),
                       authorized_operations=i32(
                           access.operations(ctx, ResourceType.GROUP, g.group_id)
                           if with_ops and not g.error_code else access.NOT_REQUESTED))
        for g in resp.groups))
