"""ShareGroupHeartbeat (key 76, v1): the one request of a KIP-932 share group member (join
with epoch 0, heartbeat, leave with -1). v0 (Kafka 4.0's early access) is not served, as
Kafka 4.1+. The member id is the client's own. Null fields mean "unchanged".

Served while the ``share.version`` feature is finalized (:mod:`samsa.broker.features`).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed
topic (else TOPIC_AUTHORIZATION_FAILED). The answer is built as v1, typed.
"""

from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat.v1 import response as wire
from kio.static.primitive import i32, i32Timedelta

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator.events import ShareGroupHeartbeat
from samsa.coordinator.responses import ShareGroupHeartbeatResponse
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
VERSIONS = (1, 1)


async def handle(ctx: RequestContext) -> wire.ShareGroupHeartbeatResponse:
    body = ctx.body
    names = body.subscribed_topic_names
    event = ShareGroupHeartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        rack_id=body.rack_id,
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
        client_id=ctx.request.client_id or "",
        client_host=ctx.client_host,
    )
    resp = _refused(ctx, names) or await ctx.broker.groups.call(event)
    assert isinstance(resp, ShareGroupHeartbeatResponse)
    assignment = None
    if resp.assignment is not None:
        assignment = wire.Assignment(topic_partitions=tuple(
            wire.TopicPartitions(topic_id=t.topic_id,
                                 partitions=tuple(i32(p) for p in t.partitions))
            for t in resp.assignment))
    return wire.ShareGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(resp.error_code),
        error_message=resp.error_message,
        member_id=resp.member_id,
        member_epoch=i32(resp.member_epoch),
        heartbeat_interval=i32Timedelta.parse(timedelta(milliseconds=resp.heartbeat_interval_ms)),
        assignment=assignment,
    )


def _refused(ctx: RequestContext, names: object) -> ShareGroupHeartbeatResponse | None:
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, ctx.body.group_id):
        return ShareGroupHeartbeatResponse(ErrorCode.group_authorization_failed)
    topics = [str(n) for n in names] if isinstance(names, tuple | list) else []
    if topics and len(access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           topics)) < len(set(topics)):
        return ShareGroupHeartbeatResponse(ErrorCode.topic_authorization_failed)
    return None
