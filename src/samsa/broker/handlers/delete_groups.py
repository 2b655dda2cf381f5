"""DeleteGroups (key 42): delete empty groups and their offsets, an error per group. A
deleted share group's share-partition state goes too (Kafka's DeleteShareGroupState).

Needs DELETE on each group (else that group is GROUP_AUTHORIZATION_FAILED).

Versions: v1 is v0's schema; v2 flexible. The answer is built as v2, typed.
"""

from __future__ import annotations

from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import DeleteGroups
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


async def handle(ctx: RequestContext) -> DeleteGroupsResponse:
    ctx.hold()  # in order: share states dropped after the coordinator's write
    resp = await access.call_group(ctx, DeleteGroups(tuple(ctx.body.groups_names)),
                                   AclOperation.DELETE)
    assert isinstance(resp, co.DeleteGroupsResponse)
    await ctx.broker.shares.durable([ctx.broker.shares.delete_group(g.group_id)
                                     for g in resp.groups if g.error_code == ErrorCode.none])
    return DeleteGroupsResponse(throttle_time=NO_THROTTLE, results=tuple(
        DeletableGroupResult(group_id=GroupId(g.group_id), error_code=ErrorCode(g.error_code))
        for g in resp.groups))
