"""OffsetDelete (key 47, v0 only): delete a group's offsets of topics it no longer consumes.

Needs DELETE on the group (else the answer is GROUP_AUTHORIZATION_FAILED) and READ on each
topic (else its partitions are TOPIC_AUTHORIZATION_FAILED). Partitions that do not exist get
UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator, as in Kafka; a group-level
error from the coordinator replaces the whole answer (Kafka's
``OffsetDeleteResponse.Builder.merge``). The answer is typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kio.schema.types import TopicName

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import FetchTopic, OffsetDelete
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)


async def handle(ctx: RequestContext) -> OffsetDeleteResponse:
    body = ctx.body
    topics = ctx.broker.topics
    if not access.allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.group_authorization_failed,
                                    throttle_time=NO_THROTTLE, topics=())
    readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                    [t.name for t in body.topics])
    denied = {(t.name, p.partition_index) for t in body.topics for p in t.partitions
              if t.name not in readable}
    unknown = {(t.name, p.partition_index) for t in body.topics for p in t.partitions
               if topics.partition(t.name, p.partition_index) is None} - denied
    skipped = unknown | denied
    known = tuple(FetchTopic(t.name, parts) for t in body.topics if (parts := tuple(
        p.partition_index for p in t.partitions if (t.name, p.partition_index) not in skipped)))
    resp = await ctx.broker.groups.call(OffsetDelete(body.group_id, known))
    assert isinstance(resp, co.OffsetDeleteResponse)
    if resp.error_code:
        return OffsetDeleteResponse(error_code=ErrorCode(resp.error_code),
                                    throttle_time=NO_THROTTLE, topics=())
    errors = {(t.name, p.partition): p.error_code for t in resp.topics for p in t.partitions}
    errors.update(dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition))
    errors.update(dict.fromkeys(denied, ErrorCode.topic_authorization_failed))
    return OffsetDeleteResponse(error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=tuple(
        OffsetDeleteResponseTopic(name=TopicName(t.name), partitions=tuple(
            OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=ErrorCode(errors[(t.name, p.partition_index)]))
            for p in t.partitions))
        for t in body.topics))
