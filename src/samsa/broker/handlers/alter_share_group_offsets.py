"""AlterShareGroupOffsets (key 91, v0): set share partitions' start offsets (as
``kafka-share-groups.sh --reset-offsets``): each named partition starts afresh at the given
offset (kept within the log), its in-flight records forgotten. The group must have no
members (NON_EMPTY_GROUP) and be a share group or not exist yet (GROUP_ID_NOT_FOUND for a
group of another type): a missing group is created, empty, in the coordinator first, as
Kafka does. Needs READ on the group and on each topic. Built as v0, typed.
"""

from __future__ import annotations

from kio.schema.alter_share_group_offsets.v0 import response as wire
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.handlers.describe_share_group_offsets import change_refusal
from samsa.broker.shares import Mark
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


async def handle(ctx: RequestContext) -> wire.AlterShareGroupOffsetsResponse:
    ctx.hold()  # in order: resets after the coordinator's write
    body = ctx.body
    group_id = str(body.group_id)
    refusal = await change_refusal(ctx, group_id, create=True)
    if refusal is not None:
        return wire.AlterShareGroupOffsetsResponse(
            throttle_time=NO_THROTTLE, error_code=refusal[0], error_message=refusal[1],
            responses=())
    topics = ctx.broker.topics
    out = []
    marks: list[Mark] = []
    for t in body.topics:
        name = str(t.topic_name)
        topic = topics.get(name)
        allowed = access.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name)
        parts = []
        for p in t.partitions:
            part = None if topic is None else topics.partition(name, int(p.partition_index))
            if not allowed:
                code = ErrorCode.topic_authorization_failed
            elif topic is None or part is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                marks.append(ctx.broker.shares.reset_start(group_id, topic.topic_id, part,
                                                           int(p.start_offset)))
                code = ErrorCode.none
            parts.append(wire.AlterShareGroupOffsetsResponsePartition(
                partition_index=i32(p.partition_index), error_code=code))
        out.append(wire.AlterShareGroupOffsetsResponseTopic(
            topic_name=TopicName(name), topic_id=None if topic is None else topic.topic_id,
            partitions=tuple(parts)))
    await ctx.broker.shares.durable(marks)  # a cluster: written in the engine
    return wire.AlterShareGroupOffsetsResponse(throttle_time=NO_THROTTLE,
                                               error_code=ErrorCode.none, responses=tuple(out))
