"""ShareGroupDescribe (77) v1."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import ShareGroupDescribe
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupMemberDescription,
    DescribedTopicPartitions,
    ShareGroupDescribeResponse,
)
from samsa.coordinator.share.group import SHARE_ASSIGNOR, Assignment

E = ErrorCode


def handle_describe(core: ShardCore, ev: ShareGroupDescribe, token: object) -> None:
    core.reply(token, ShareGroupDescribeResponse(
        tuple(describe_group(core, gid) for gid in ev.groups)))


def describe_group(core: ShardCore, gid: str) -> ConsumerDescribedGroup:
    group = core.hard.share.groups.get(gid)
    if group is None:
        other = core.find_group(gid) is not None
        message = f"Group {gid} is not a share group." if other else f"Group {gid} not found."
        return ConsumerDescribedGroup(gid, E.group_id_not_found, message)
    return ConsumerDescribedGroup(
        group_id=gid,
        error_code=E.none,
        group_state=group.state.value,
        group_epoch=group.epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SHARE_ASSIGNOR,
        members=tuple(
            ConsumerGroupMemberDescription(
                member_id=m.member_id, instance_id=None, rack_id=m.rack_id,
                member_epoch=m.member_epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=None, assignment=_named(core, m.assigned),
                target_assignment=_named(core, group.target.get(m.member_id, {})))
            for m in group.members.values()),
    )


def _named(core: ShardCore, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
    topics = core.topics.topics
    return tuple(
        DescribedTopicPartitions(t, topics[t].name, tuple(sorted(ps)))
        for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if t in topics)
