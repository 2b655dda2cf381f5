"""The target assignment of a consumer group (Kafka's ``TargetAssignmentBuilder``).

When the group epoch passes the assignment epoch, the group's server assignor (the one most
members ask for, else the first of ``group.consumer.assignors``) computes a new target from
every member's subscription (topic names and resolved regexes, as topic ids) and the
current target (for stickiness). Only members whose target changed get a record, then the
assignment epoch record is written.
"""

from __future__ import annotations

import uuid
from functools import lru_cache

from samsa.assignors.server.interface import GroupSpec, MemberSpec, ServerAssignor
from samsa.assignors.server.registry import resolve_server_assignors
from samsa.coordinator.consumer.group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    to_topic_partitions,
)
from samsa.coordinator.consumer.records import (
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from samsa.coordinator.consumer.topics import TopicsSnapshot
from samsa.coordinator.core import ShardCore

#: distinct subscriptions remembered per group before the cache starts over
_IDS_CACHE_SIZE = 1024


@lru_cache(maxsize=16)
def assignors(names: tuple[str, ...]) -> dict[str, ServerAssignor]:
    """The configured server assignors by name, in order (the first is the default)."""
    return {a.name: a for a in resolve_server_assignors(names)}


def default_assignor(core: ShardCore) -> str:
    return next(iter(assignors(core.config.consumer_assignors)))


def preferred_assignor(core: ShardCore, group: ConsumerGroup) -> str:
    """Kafka's ``computePreferredServerAssignor``: the assignor most members name."""
    counts: dict[str, int] = {}
    for m in group.members.values():
        if m.server_assignor is not None:
            counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
    if not counts:
        return default_assignor(core)
    return min(counts, key=lambda name: (-counts[name], name))


def subscribed_ids(group: ConsumerGroup, member: ConsumerMember,
                   topics: TopicsSnapshot) -> frozenset[uuid.UUID]:
    """The ids of the existing topics ``member`` subscribes to (names and its regex),
    computed once per distinct subscription and topics snapshot."""
    regex = member.subscribed_topic_regex
    resolved = group.regexes.get(regex) if regex else None
    key = (member.subscribed_topic_names, regex, None if resolved is None else resolved.topics)
    if group.ids_topics is not topics:
        group.ids_cache.clear()
        group.ids_topics = topics
    ids = group.ids_cache.get(key)
    if ids is None:
        names = set(member.subscribed_topic_names)
        if resolved is not None:
            names |= resolved.topics
        by_name = topics.by_name
        ids = frozenset(by_name[n].topic_id for n in names if n in by_name)
        if len(group.ids_cache) >= _IDS_CACHE_SIZE:
            group.ids_cache.clear()
        group.ids_cache[key] = ids
    return ids


def update_target(core: ShardCore, group: ConsumerGroup, epoch: int) -> None:
    """Compute the target for ``epoch`` and write what changed."""
    topics = core.topics
    specs = {
        mid: MemberSpec(mid, subscribed_ids(group, m, topics), m.instance_id, m.rack_id)
        for mid, m in group.members.items()
    }
    assignor = assignors(core.config.consumer_assignors)[preferred_assignor(core, group)]
    current = {mid: a for mid, a in group.target.items() if mid in specs}
    result = assignor.assign(GroupSpec(specs, current), topics.topics)
    gid = group.group_id
    for mid in group.members:
        new: Assignment = {t: ps for t, ps in result.get(mid, {}).items() if ps}
        old = group.target.get(mid)
        if old is None or dict(old) != new:
            core.write(
                ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(new)),
            )
    core.write(
        ConsumerGroupTargetAssignmentMetadataKey(gid),
        ConsumerGroupTargetAssignmentMetadataValue(epoch),
    )
