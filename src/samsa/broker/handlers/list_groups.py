"""ListGroups (key 16): every group of this broker's coordinator, with its state.

With DESCRIBE on the cluster every group is listed, otherwise only the groups the caller
may DESCRIBE (Kafka's rule; nothing is refused).

Versions: v1 throttle_time; v3 flexible; v4 states_filter and each group's state; v5
types_filter and each group's type (``classic`` or ``consumer``). The answer is built as
v5, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.types import GroupId

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import ListGroups
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = (0, 5)


async def handle(ctx: RequestContext) -> ListGroupsResponse:
    states = tuple(getattr(ctx.body, "states_filter", ()) or ())
    types = tuple(getattr(ctx.body, "types_filter", ()) or ())
    resp = await ctx.broker.groups.call(ListGroups(states, types))
    assert isinstance(resp, co.ListGroupsResponse)
    everything = access.cluster_allowed(ctx, AclOperation.DESCRIBE, log=False)
    return ListGroupsResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode(resp.error_code),
                              groups=tuple(ListedGroup(group_id=GroupId(g.group_id),
                                                       protocol_type=g.protocol_type,
                                                       group_state=g.state,
                                                       group_type=g.group_type)
                                           for g in resp.groups if everything or
                                           access.allowed(ctx, AclOperation.DESCRIBE,
                                                          ResourceType.GROUP, g.group_id,
                                                          log=False)))
