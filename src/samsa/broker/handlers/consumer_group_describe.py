"""ConsumerGroupDescribe (key 69, v0-v1): KIP-848 groups with their group epoch, target
assignment epoch, assignor and, per member, its epoch and current and target assignment.

v1 adds each member's type (0: a classic member of a consumer group, 1: a consumer-protocol
member). A classic group answers GROUP_ID_NOT_FOUND ("... is not a consumer group"), which
makes the Java and librdkafka admin clients fall back to DescribeGroups, as with Kafka.
Served only when ``group.coordinator.rebalance.protocols`` includes ``consumer``. Needs
DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED); a group whose members are assigned
a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, without its members
(KAFKA-18813). The answer is built as v1, typed.
"""

from __future__ import annotations

from kio.schema.consumer_group_describe.v1 import response as wire
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.group_wire import (
    NO_OPERATIONS,
    described_assignment,
    described_group,
    hide_undescribable,
)
from samsa.broker.handlers.consumer_group_heartbeat import consumer_protocol_enabled
from samsa.coordinator.events import ConsumerGroupDescribe
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupDescribeResponse,
    ConsumerGroupMemberDescription,
    DescribedTopicPartitions,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = (0, 1)


def _assignment(parts: tuple[DescribedTopicPartitions, ...]) -> wire.Assignment:
    assignment: wire.Assignment = described_assignment(wire, parts)
    return assignment


def _member(m: ConsumerGroupMemberDescription) -> wire.Member:
    return wire.Member(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
        member_epoch=i32(m.member_epoch), client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=tuple(TopicName(n) for n in m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_assignment(m.assignment),
        target_assignment=_assignment(m.target_assignment),
        member_type=i8(m.member_type))


def _group(g: ConsumerDescribedGroup, operations: i32 = NO_OPERATIONS) -> wire.DescribedGroup:
    group: wire.DescribedGroup = described_group(
        wire, g, tuple(_member(m) for m in g.members), operations)
    return group


async def handle(ctx: RequestContext) -> wire.ConsumerGroupDescribeResponse:
    body = ctx.body
    if not consumer_protocol_enabled(ctx.broker.config):
        return wire.ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(
            wire.DescribedGroup(error_code=ErrorCode.unsupported_version, group_id=g,
                                group_state="", group_epoch=i32(0), assignment_epoch=i32(0),
                                assignor_name="", members=(),
                                authorized_operations=NO_OPERATIONS)
            for g in body.group_ids))
    resp = await access.call_group(ctx, ConsumerGroupDescribe(
        tuple(body.group_ids), bool(body.include_authorized_operations)), AclOperation.DESCRIBE)
    assert isinstance(resp, ConsumerGroupDescribeResponse)
    groups = [hide_undescribable(ctx, g) for g in resp.groups]
    return wire.ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(
        _group(g, i32(access.operations(ctx, ResourceType.GROUP, g.group_id)))
        if body.include_authorized_operations and not g.error_code else _group(g)
        for g in groups))

