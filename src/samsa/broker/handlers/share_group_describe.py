"""ShareGroupDescribe (key 77, v1): share groups with their group epoch, assignment epoch,
assignor (``simple``) and, per member, its epoch, subscriptions and assignment. A group that
is not a share group answers GROUP_ID_NOT_FOUND ("... is not a share group"), as Kafka.
Needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED); a group whose members are
assigned a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, without its
members (KAFKA-18813, as ConsumerGroupDescribe). Built as v1, typed.
"""

from __future__ import annotations

from kio.schema.share_group_describe.v1 import response as wire
from kio.schema.types import TopicName
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.group_wire import (
    NO_OPERATIONS,
    described_assignment,
    described_group,
    hide_undescribable,
)
from samsa.coordinator.events import ShareGroupDescribe
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupMemberDescription,
    DescribedTopicPartitions,
    ShareGroupDescribeResponse,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
VERSIONS = (1, 1)


def _assignment(parts: tuple[DescribedTopicPartitions, ...]) -> wire.Assignment:
    assignment: wire.Assignment = described_assignment(wire, parts)
    return assignment


def _member(m: ConsumerGroupMemberDescription) -> wire.Member:
    return wire.Member(
        member_id=m.member_id, rack_id=m.rack_id, member_epoch=i32(m.member_epoch),
        client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=tuple(TopicName(n) for n in m.subscribed_topic_names),
        assignment=_assignment(m.assignment))


def _group(g: ConsumerDescribedGroup, operations: i32 = NO_OPERATIONS) -> wire.DescribedGroup:
    group: wire.DescribedGroup = described_group(
        wire, g, tuple(_member(m) for m in g.members), operations)
    return group


async def handle(ctx: RequestContext) -> wire.ShareGroupDescribeResponse:
    body = ctx.body
    resp = await access.call_group(ctx, ShareGroupDescribe(
        tuple(body.group_ids), bool(body.include_authorized_operations)), AclOperation.DESCRIBE)
    assert isinstance(resp, ShareGroupDescribeResponse)
    groups = [hide_undescribable(ctx, g) for g in resp.groups]
    return wire.ShareGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(
        _group(g, i32(access.operations(ctx, ResourceType.GROUP, g.group_id)))
        if body.include_authorized_operations and not g.error_code else _group(g)
        for g in groups))
