"""ConsumerGroupDescribe (API 69)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.consumer.group import Assignment, ConsumerGroup
from samsa.coordinator.consumer.target import preferred_assignor
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import ConsumerGroupDescribe
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupDescribeResponse,
    ConsumerGroupMemberDescription,
    DescribedTopicPartitions,
)

E = ErrorCode

CONSUMER_GROUP_TYPE = "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"


def handle_describe(core: ShardCore, ev: ConsumerGroupDescribe, token: object) -> None:
    core.reply(token, ConsumerGroupDescribeResponse(
        tuple(describe_group(core, gid) for gid in ev.groups)))


def describe_group(core: ShardCore, gid: str) -> ConsumerDescribedGroup:
    group = core.hard.consumer.groups.get(gid)
    if group is None:
        message = (f"Group {gid} is not a consumer group" if core.find_group(gid) is not None
                   else f"Group {gid} not found.")
        return ConsumerDescribedGroup(gid, E.group_id_not_found, message)
    return ConsumerDescribedGroup(
        group_id=gid,
        error_code=E.none,
        group_state=group.state.value,
        group_epoch=group.epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=preferred_assignor(core, group),
        members=tuple(_member(core, group, mid) for mid in group.members),
    )


def _member(core: ShardCore, group: ConsumerGroup, mid: str) -> ConsumerGroupMemberDescription:
    m = group.members[mid]
    return ConsumerGroupMemberDescription(
        member_id=mid,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=m.member_epoch,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names,
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_named(core, m.assigned),
        target_assignment=_named(core, group.target.get(mid, {})),
    )


def _named(core: ShardCore, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
    """Topic ids with their names; topics no longer known are left out (as Kafka)."""
    out = []
    for topic_id, partitions in sorted(assignment.items()):
        info = core.topics.topics.get(topic_id)
        if info is not None:
            out.append(DescribedTopicPartitions(topic_id, info.name, tuple(sorted(partitions))))
    return tuple(out)
