"""ConsumerGroupHeartbeat (key 68, v0-v1): the one request of a KIP-848 ``consumer`` group
member (join with epoch 0, heartbeat, leave with -1, static leave with -2).

v1 adds ``subscribed_topic_regex`` (broker-side RE2) and makes the member id the client's
own. Null fields mean "unchanged since the last heartbeat" and stay ``None`` in the event.
Served only when ``group.coordinator.rebalance.protocols`` includes ``consumer``. Needs READ
on the group (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every topic subscribed by
name (else TOPIC_AUTHORIZATION_FAILED); a regex matches only the topics the member may
describe (KAFKA-18813). The answer is built as v1, typed; one without an assignment (a
steady heartbeat's) is encoded once per member and epoch (:mod:`samsa.protocol.answers`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.consumer_group_heartbeat.v1 import response as wire
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from samsa.broker import access
from samsa.broker.config import ConfigError
from samsa.broker.context import RequestContext
from samsa.broker.group_wire import heartbeat_answer, heartbeat_refusal
from samsa.coordinator.events import ConsumerGroupHeartbeat, TopicPartitions
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse
from samsa.protocol.answers import AnswerMemo
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, millis
from samsa.protocol.codec import Encoded
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
VERSIONS = (0, 1)

#: The APIs that exist only for the consumer protocol (hidden from ApiVersions without it).
CONSUMER_PROTOCOL_APIS = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT,
                                    ApiKey.CONSUMER_GROUP_DESCRIBE})


_NO_INTERVAL = i32Timedelta.parse(timedelta(0))


def consumer_protocol_enabled(config: BrokerConfig) -> bool:
    """``group.coordinator.rebalance.protocols`` includes ``consumer`` (Kafka 4.x's default,
    also when the setting is unknown)."""
    try:
        value = config["group.coordinator.rebalance.protocols"]
    except ConfigError:
        return True
    names = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return "consumer" in {str(n).strip().lower() for n in names}


def _owned(req: Any) -> tuple[TopicPartitions, ...] | None:
    if req is None:
        return None
    return tuple(TopicPartitions(t.topic_id, tuple(int(p) for p in t.partitions))
                 for t in req if t.topic_id is not None)


async def handle(ctx: RequestContext) -> wire.ConsumerGroupHeartbeatResponse | Encoded:
    body = ctx.body
    if not consumer_protocol_enabled(ctx.broker.config):
        # Kafka's answer when the protocol is off (a client that ignored ApiVersions).
        return wire.ConsumerGroupHeartbeatResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.unsupported_version,
            member_epoch=i32(0), heartbeat_interval=_NO_INTERVAL)
    names = body.subscribed_topic_names
    event = ConsumerGroupHeartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=millis(body.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
        server_assignor=body.server_assignor,
        topic_partitions=_owned(body.topic_partitions),
        client_id=ctx.request.client_id or "",
        client_host=ctx.client_host,
        api_version=ctx.version,
        describable=None if ctx.broker.authorizer is None else lambda topics: (
            access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics,
                                 log=False)),
    )
    resp = _refused(ctx, names) or await ctx.broker.groups.call(event)
    assert isinstance(resp, ConsumerGroupHeartbeatResponse)
    if resp.assignment is None:  # a steady heartbeat's answer: encoded once
        return _ANSWERS(ctx.version, resp)
    return _typed(resp)


def _typed(resp: ConsumerGroupHeartbeatResponse) -> wire.ConsumerGroupHeartbeatResponse:
    answer: wire.ConsumerGroupHeartbeatResponse = heartbeat_answer(
        wire, wire.ConsumerGroupHeartbeatResponse, resp)
    return answer


#: Answers without an assignment (every steady heartbeat's), encoded once per member
#: and epoch; one with an assignment is built afresh (it may be large, and changes).
_ANSWERS = AnswerMemo(API_KEY, _typed)


def _refused(ctx: RequestContext, names: Any) -> ConsumerGroupHeartbeatResponse | None:
    """Kafka's checks before the coordinator (:mod:`samsa.broker.group_wire`)."""
    refused = heartbeat_refusal(ctx, names, ConsumerGroupHeartbeatResponse)
    assert refused is None or isinstance(refused, ConsumerGroupHeartbeatResponse)
    return refused
