"""DeleteShareGroupOffsets (key 92, v0): forget a share group's state of whole topics; its
next fetch of them starts where ``share.auto.offset.reset`` says. The group must have no
members (NON_EMPTY_GROUP) and be a share group (GROUP_ID_NOT_FOUND otherwise). Needs READ
on the group and on each topic. Built as v0, typed.
"""

from __future__ import annotations

from kio.schema.delete_share_group_offsets.v0 import response as wire
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.handlers.describe_share_group_offsets import change_refusal
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


async def handle(ctx: RequestContext) -> wire.DeleteShareGroupOffsetsResponse:
    ctx.hold()  # in order: deletes after the coordinator's write
    body = ctx.body
    group_id = str(body.group_id)
    refusal = await change_refusal(ctx, group_id, create=False)
    if refusal is not None:
        return wire.DeleteShareGroupOffsetsResponse(
            throttle_time=NO_THROTTLE, error_code=refusal[0], error_message=refusal[1],
            responses=())
    out = []
    for t in body.topics:
        name = str(t.topic_name)
        topic = ctx.broker.topics.get(name)
        if not access.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name):
            code = ErrorCode.topic_authorization_failed
        elif topic is None:
            code = ErrorCode.unknown_topic_or_partition
        else:
            await ctx.broker.shares.durable([ctx.broker.shares.forget_topic(group_id,
                                                                            topic.topic_id)])
            code = ErrorCode.none
        out.append(wire.DeleteShareGroupOffsetsResponseTopic(
            topic_name=TopicName(name), topic_id=None if topic is None else topic.topic_id,
            error_code=code))
    return wire.DeleteShareGroupOffsetsResponse(throttle_time=NO_THROTTLE,
                                                error_code=ErrorCode.none, responses=tuple(out))
