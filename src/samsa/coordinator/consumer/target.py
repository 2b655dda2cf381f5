"""The target assignment of a consumer group (Kafka's ``TargetAssignmentBuilder``).

When the group epoch passes the assignment epoch, the group's server assignor (the one most
members ask for, else the first of ``group.consumer.assignors``) computes a new target from
every member's subscription (topic names and resolved regexes, as topic ids) and the
current target (for stickiness). The computation is a :class:`TargetWork` the coordinator
hands its edge as a job (:mod:`.batching` decides when); when it comes back current, only
members whose target changed get a record, then the assignment epoch record is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from samsa.assignors.server.interface import (
    GroupSpec,
    MemberSpec,
    ServerAssignor,
    TopicInfo,
    TopicsView,
)
from samsa.assignors.server.registry import resolve_server_assignors
from samsa.coordinator.consumer import record_factory as records
from samsa.coordinator.consumer.group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
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


@dataclass(frozen=True, eq=False)
class TargetWork:
    """A target assignment to compute (a job's work, :mod:`samsa.coordinator.jobs`): a
    snapshot of the group at ``epoch``, and the assignor to run on it. Pure and picklable:
    a worker process runs it as well as the event loop."""

    epoch: int
    assignors: tuple[str, ...]
    assignor: str
    spec: GroupSpec
    topics: TopicsView

    def __call__(self) -> dict[str, Assignment]:
        """The members whose target changed, with their new one: a worker sends back, and
        the event loop unpickles and later collects, a few entries, not the whole group."""
        result = assignors(self.assignors)[self.assignor].assign(self.spec, self.topics)
        current = self.spec.current
        changed: dict[str, Assignment] = {}
        for mid in self.spec.members:
            new = {t: ps for t, ps in result.get(mid, {}).items() if ps}
            old = current.get(mid)
            if old is None or dict(old) != new:
                changed[mid] = new
        return changed

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickled as plain tuples, dicts and sets (C-speed; a worker process rebuilds the
        specs): pickling the slotted spec objects one by one would cost the event loop
        more than the assignment saves it."""
        members = tuple((m.member_id, m.subscribed, m.instance_id, m.rack_id)
                        for m in self.spec.members.values())
        topics = tuple((t.topic_id, t.name, t.partitions, dict(t.racks))
                       for t in self.topics.values())
        return _target_work, (self.epoch, self.assignors, self.assignor, members,
                              dict(self.spec.current), topics)


def _target_work(epoch: int, names: tuple[str, ...], assignor: str,
                 members: tuple[tuple[str, frozenset[uuid.UUID], str | None, str | None], ...],
                 current: dict[str, Assignment],
                 topics: tuple[tuple[uuid.UUID, str, int, dict[int, frozenset[str]]], ...],
                 ) -> TargetWork:
    specs = {m[0]: MemberSpec(*m) for m in members}
    return TargetWork(epoch, names, assignor, GroupSpec(specs, current),
                      {t[0]: TopicInfo(*t) for t in topics})


def target_work(core: ShardCore, group: ConsumerGroup) -> TargetWork:
    """The work of computing the group's target for its current epoch: every member's
    subscription (names and resolved regexes, as topic ids) and the current target."""
    topics = core.topics
    specs = {
        mid: MemberSpec(mid, subscribed_ids(group, m, topics), m.instance_id, m.rack_id)
        for mid, m in group.members.items()
    }
    current = {mid: a for mid, a in group.target.items() if mid in specs}
    return TargetWork(group.epoch, tuple(core.config.consumer_assignors),
                      preferred_assignor(core, group), GroupSpec(specs, current), topics.topics)


def is_current(work: TargetWork, group: ConsumerGroup) -> bool:
    """Kafka's rule for an offloaded assignment: it stands only if the group is still at the
    epoch it was computed for, with the same members (a static member replaced meanwhile
    keeps the epoch but not its member id)."""
    return work.epoch == group.epoch and work.spec.members.keys() == group.members.keys()


def write_target(core: ShardCore, group: ConsumerGroup, epoch: int,
                 changed: Mapping[str, Assignment]) -> None:
    """Write the target for ``epoch`` (a current :class:`TargetWork`'s outcome: the members
    whose target changed): a record for each of them, then the metadata record (the
    assignment epoch, and now as the computation's timestamp)."""
    gid = group.group_id
    for mid in sorted(changed):
        if mid in group.members:
            core.write(*records.target_member(gid, mid, changed[mid]))
    core.write(*records.target_epoch(gid, epoch, core.now_ms))
