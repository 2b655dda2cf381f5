"""Wire conversion shared by the KIP-848 and KIP-932 group handlers: their heartbeat and
describe answers have the same shape in different kio modules, so each handler passes its
module (``wire``) and these build the typed answer once for both. Both describe handlers
hide groups with topics the caller may not describe (:func:`hide_undescribable`,
KAFKA-18813)."""

from __future__ import annotations

from datetime import timedelta
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupHeartbeatResponse,
    DescribedTopicPartitions,
    ShareGroupHeartbeatResponse,
)
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

NO_OPERATIONS = i32(access.NOT_REQUESTED)

HeartbeatAnswer = ConsumerGroupHeartbeatResponse | ShareGroupHeartbeatResponse


def heartbeat_refusal(ctx: RequestContext, names: Any,
                      answer: type[HeartbeatAnswer]) -> HeartbeatAnswer | None:
    """Kafka's checks before the coordinator: READ on the group, then DESCRIBE on every
    topic subscribed by name; ``answer`` carries the refusal."""
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, ctx.body.group_id):
        return answer(ErrorCode.group_authorization_failed)
    topics = [str(n) for n in names] if names else []
    if topics and len(access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           topics)) < len(set(topics)):
        return answer(ErrorCode.topic_authorization_failed)
    return None


def heartbeat_answer(wire: ModuleType, response: type[Any], resp: HeartbeatAnswer) -> Any:
    """``resp`` as ``wire``'s typed ``response`` (the assignment by topic id)."""
    assignment = None
    if resp.assignment is not None:
        assignment = wire.Assignment(topic_partitions=tuple(
            wire.TopicPartitions(topic_id=t.topic_id,
                                 partitions=tuple(i32(p) for p in t.partitions))
            for t in resp.assignment))
    return response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(resp.error_code),
        error_message=resp.error_message,
        member_id=resp.member_id,
        member_epoch=i32(resp.member_epoch),
        heartbeat_interval=i32Timedelta.parse(timedelta(milliseconds=resp.heartbeat_interval_ms)),
        assignment=assignment,
    )


def described_assignment(wire: ModuleType, parts: tuple[DescribedTopicPartitions, ...]) -> Any:
    """A described member's partitions, by topic id and name."""
    return wire.Assignment(topic_partitions=tuple(
        wire.TopicPartitions(topic_id=t.topic_id, topic_name=TopicName(t.topic_name),
                             partitions=tuple(i32(p) for p in t.partitions))
        for t in parts))


def described_group(wire: ModuleType, g: ConsumerDescribedGroup, members: tuple[Any, ...],
                    operations: i32 = NO_OPERATIONS) -> Any:
    """One described group with its already converted ``members``."""
    return wire.DescribedGroup(
        error_code=ErrorCode(g.error_code), error_message=g.error_message,
        group_id=GroupId(g.group_id), group_state=g.group_state,
        group_epoch=i32(g.group_epoch), assignment_epoch=i32(g.assignment_epoch),
        assignor_name=g.assignor_name, members=members, authorized_operations=operations)


HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def hide_undescribable(ctx: RequestContext, g: ConsumerDescribedGroup) -> ConsumerDescribedGroup:
    """``g``, or TOPIC_AUTHORIZATION_FAILED without members if a member is assigned (or
    targeted) a topic the caller may not DESCRIBE (KAFKA-18813: ConsumerGroupDescribe and
    ShareGroupDescribe)."""
    if ctx.broker.authorizer is None or g.error_code:
        return g
    topics = {t.topic_name for m in g.members for t in (*m.assignment, *m.target_assignment)}
    if access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics) == topics:
        return g
    return ConsumerDescribedGroup(g.group_id, ErrorCode.topic_authorization_failed,
                                  HIDDEN_TOPICS)
