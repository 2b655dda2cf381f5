"""ConsumerGroupDescribe (key 69, v0-v1): KIP-848 groups with their group epoch, target
assignment epoch, assignor and, per member, its epoch and current and target assignment.

v1 adds each member's type (0: a classic member of a consumer group, 1: a consumer-protocol
member). A classic group answers GROUP_ID_NOT_FOUND ("... is not a consumer group"), which
makes the Java and librdkafka admin clients fall back to DescribeGroups, as with Kafka.
Served only when ``group.coordinator.rebalance.protocols`` includes ``consumer``.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.broker.handlers.consumer_group_heartbeat import consumer_protocol_enabled
from samsa.coordinator.events import ConsumerGroupDescribe
from samsa.coordinator.responses import ConsumerGroupDescribeResponse, DescribedTopicPartitions
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = (0, 1)

#: "Not requested" (samsa has no authorizer to report operations from).
NO_OPERATIONS = -2147483648


def _assignment(parts: tuple[DescribedTopicPartitions, ...]) -> dict[str, Any]:
    return {"topic_partitions": [{"topic_id": t.topic_id, "topic_name": t.topic_name,
                                  "partitions": list(t.partitions)} for t in parts]}


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    if not consumer_protocol_enabled(ctx.broker.config):
        return ctx.respond(throttle_time=0, groups=[
            {"error_code": ErrorCode.unsupported_version, "group_id": g,
             "authorized_operations": NO_OPERATIONS} for g in body.group_ids])
    resp = await ctx.broker.groups.call(ConsumerGroupDescribe(
        tuple(body.group_ids), bool(body.include_authorized_operations)))
    assert isinstance(resp, ConsumerGroupDescribeResponse)
    return ctx.respond(throttle_time=0, groups=[
        {"error_code": g.error_code, "error_message": g.error_message, "group_id": g.group_id,
         "group_state": g.group_state, "group_epoch": g.group_epoch,
         "assignment_epoch": g.assignment_epoch, "assignor_name": g.assignor_name,
         "members": [{"member_id": m.member_id, "instance_id": m.instance_id,
                      "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                      "client_id": m.client_id, "client_host": m.client_host,
                      "subscribed_topic_names": list(m.subscribed_topic_names),
                      "subscribed_topic_regex": m.subscribed_topic_regex,
                      "assignment": _assignment(m.assignment),
                      "target_assignment": _assignment(m.target_assignment),
                      "member_type": m.member_type} for m in g.members],
         "authorized_operations": NO_OPERATIONS}
        for g in resp.groups])
