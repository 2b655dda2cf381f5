"""ShareGroupHeartbeat (key 76, v1): the one request of a KIP-932 share group member (join
with epoch 0, heartbeat, leave with -1). v0 (Kafka 4.0's early access) is not served, as
Kafka 4.1+. The member id is the client's own. Null fields mean "unchanged".

Served while the ``share.version`` feature is finalized (:mod:`samsa.broker.features`).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed
topic (else TOPIC_AUTHORIZATION_FAILED). The answer is built as v1, typed.
"""

from __future__ import annotations

from kio.schema.share_group_heartbeat.v1 import response as wire

from samsa.broker.context import RequestContext
from samsa.broker.group_wire import heartbeat_answer, heartbeat_refusal
from samsa.coordinator.events import ShareGroupHeartbeat
from samsa.coordinator.responses import ShareGroupHeartbeatResponse
from samsa.protocol.api_keys import ApiKey

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
    answer: wire.ShareGroupHeartbeatResponse = heartbeat_answer(
        wire, wire.ShareGroupHeartbeatResponse, resp)
    return answer


def _refused(ctx: RequestContext, names: object) -> ShareGroupHeartbeatResponse | None:
    refused = heartbeat_refusal(ctx, names, ShareGroupHeartbeatResponse)
    assert refused is None or isinstance(refused, ShareGroupHeartbeatResponse)
    return refused
