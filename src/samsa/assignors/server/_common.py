"""Shared steps of the server-side assignors: inputs in a fixed order, the valid current
assignment, rack matching and the result's shape.

Inside the assignors, topics are numbered (by id order) and members too (by member id), so
the inner loops work on ints: hashing a :class:`uuid.UUID` is a Python-level call, and a
target assignment for a thousand members may otherwise hash topic ids a million times.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from samsa.assignors.server.interface import Assignment, GroupSpec, MemberSpec, TopicsView

#: The result of an assignor for one member.
Out = dict[uuid.UUID, frozenset[int]]


class TopicIndex:
    """Topic id -> topic number, looking a given UUID object up by hash only once."""

    def __init__(self, ids: list[uuid.UUID]) -> None:
        self.ids = ids
        self._by_uuid = {t: k for k, t in enumerate(ids)}
        #: ``id(topic id object)`` -> number, for the objects seen (a fast path for hot loops;
        #: :meth:`get` on a miss).
        self.lookup = {id(t): k for k, t in enumerate(ids)}
        self._alive: list[uuid.UUID] = []  # keeps cached objects alive, so ids stay unique

    def get(self, t: uuid.UUID) -> int:
        """The topic's number, -1 if no member subscribes to it."""
        k = self.lookup.get(id(t))
        if k is None:
            k = self._by_uuid.get(t, -1)
            self.lookup[id(t)] = k
            self._alive.append(t)
        return k


@dataclass(slots=True)
class Inputs:
    """The group in a deterministic order: members sorted by id, topics by id."""

    members: list[MemberSpec]
    topics: TopicIndex
    counts: list[int]
    """Partition count of each subscribed topic, by number."""
    subscribed: list[frozenset[int]]
    """Each member's subscribed topics (numbers) that exist in the topics view."""

    def homogeneous(self) -> bool:
        """True when every member subscribes to the same topics."""
        first = self.subscribed[0] if self.subscribed else frozenset()
        return all(s is first or s == first for s in self.subscribed)


def prepare(group: GroupSpec, topics: TopicsView) -> Inputs:
    """Sort the members, number the topics, drop subscriptions to unknown topics."""
    members = [group.members[m] for m in sorted(group.members)]
    # Members mostly share a few subscriptions: each distinct one is worked out once.
    known: dict[frozenset[uuid.UUID], frozenset[uuid.UUID]] = {}
    for m in members:
        if m.subscribed not in known:
            subs = m.subscribed
            if not subs <= topics.keys():
                subs = frozenset(t for t in subs if t in topics)
            known[m.subscribed] = subs
    ids = sorted(frozenset().union(*known.values()), key=lambda t: t.int)
    index = TopicIndex(ids)
    numbered = {s: frozenset(index.get(t) for t in v) for s, v in known.items()}
    return Inputs(
        members,
        index,
        [topics[t].partitions for t in ids],
        [numbered[m.subscribed] for m in members],
    )


@dataclass(slots=True)
class Held:
    """What one member may keep of its current assignment."""

    parts: list[tuple[int, frozenset[int]]]
    """(topic number, partitions), by topic number."""
    size: int
    source: Assignment | None
    """The member's current assignment when ``parts`` is all of it, unchanged."""

    def out(self, ids: list[uuid.UUID]) -> Out:
        """As a result entry."""
        if self.source is not None:
            return dict(self.source)  # a dict copy reuses the stored hashes
        return {ids[k]: ps for k, ps in self.parts}


def valid_current(group: GroupSpec, inputs: Inputs) -> list[Held]:
    """Each member's current partitions that it may keep: subscribed, existing, and not
    claimed by a member earlier in the order (the current assignment should never have two
    owners, but the assignor does not rely on it).

    The checks run per topic over all its claims at once: the per-entry loop is the hot
    spot of an incremental assignment.
    """
    counts, index = inputs.counts, inputs.topics
    lookup = index.lookup
    claims: list[list[tuple[int, frozenset[int]]]] = [[] for _ in counts]
    altered: set[int] = set()  # members with something dropped
    for i, member in enumerate(inputs.members):
        current = group.current.get(member.member_id)
        if not current:
            continue
        subs = inputs.subscribed[i]
        for t, ps in current.items():
            k = lookup.get(id(t))
            if k is None:
                k = index.get(t)
            if k in subs and ps:
                claims[k].append((i, ps))
            else:
                altered.add(i)
    held = [Held([], 0, None) for _ in inputs.members]
    for k, claim in enumerate(claims):
        if not claim:
            continue
        if len(claim) > 1 or min(claim[0][1]) < 0 or max(claim[0][1]) >= counts[k]:
            claim = claims[k] = _settle(counts[k], claim, altered)
        for i, ps in claim:
            h = held[i]
            h.parts.append((k, ps))
            h.size += len(ps)
    for i, member in enumerate(inputs.members):
        if i not in altered:
            held[i].source = group.current.get(member.member_id)
    return held


def _settle(n: int, claim: list[tuple[int, frozenset[int]]], altered: set[int]
            ) -> list[tuple[int, frozenset[int]]]:
    """One topic's claims without partitions it does not have, and without partitions an
    earlier member claims too."""
    union = frozenset().union(*(ps for _, ps in claim))
    if min(union) >= 0 and max(union) < n and sum(len(ps) for _, ps in claim) == len(union):
        return claim
    seen: set[int] = set()
    settled = []
    for i, ps in claim:
        mine = frozenset(p for p in ps if 0 <= p < n and p not in seen)
        seen |= mine
        if mine != ps:
            altered.add(i)
        if mine:
            settled.append((i, mine))
    return settled


class Racks:
    """Rack matching, used only when it can make a difference (as Kafka decides): some
    member sends a rack, some partition has replica racks on a member rack, and the
    partitions do not all have the same replica racks."""

    def __init__(self, inputs: Inputs, topics: TopicsView) -> None:
        self.member_rack: list[str | None] = [m.rack_id or None for m in inputs.members]
        self.member_racks = {r for r in self.member_rack if r is not None}
        self.partition_racks: list[Mapping[int, frozenset[str]]] = []
        shapes: set[frozenset[str]] = set()
        seen_racks: set[str] = set()
        if self.member_racks:
            for t, n in zip(inputs.topics.ids, inputs.counts, strict=True):
                racks = topics[t].racks
                self.partition_racks.append(racks)
                for p, rs in racks.items():
                    if 0 <= p < n and rs:
                        shapes.add(rs)
                        seen_racks |= rs
        self.active = bool(self.member_racks & seen_racks) and len(shapes) > 1

    def racks_of(self, k: int, partition: int) -> frozenset[str]:
        return self.partition_racks[k].get(partition, frozenset())

    def mismatched(self, member: int, k: int, partition: int) -> bool:
        """The member has a rack, the partition has replica racks, and they differ."""
        rack = self.member_rack[member]
        if rack is None:
            return False
        racks = self.racks_of(k, partition)
        return bool(racks) and rack not in racks

    def matches(self, member: int, k: int, partition: int) -> bool:
        rack = self.member_rack[member]
        return rack is not None and rack in self.racks_of(k, partition)


def finish(inputs: Inputs, owned: Sequence[Out]) -> dict[str, Out]:
    """The result: every member with its (non-empty) frozensets, by member id."""
    return {m.member_id: o for m, o in zip(inputs.members, owned, strict=True)}


def subscribers_by_topic(subscribed: list[frozenset[int]], order: list[int],
                         ntopics: int) -> list[list[int]]:
    """Each topic's subscribers, in ``order``. Worked out per distinct subscription, not per
    member: a thousand members on five hundred topics share one or a few."""
    classes: dict[frozenset[int], list[int]] = {}
    for i in order:
        classes.setdefault(subscribed[i], []).append(i)
    lists = list(classes.values())
    topic_classes: list[list[int]] = [[] for _ in range(ntopics)]
    for c, subs in enumerate(classes):
        for k in subs:
            topic_classes[k].append(c)
    rank = {i: r for r, i in enumerate(order)}
    merged: dict[tuple[int, ...], list[int]] = {}
    result = []
    for cs in topic_classes:
        key = tuple(cs)
        members = merged.get(key)
        if members is None:
            members = lists[cs[0]] if len(cs) == 1 else sorted(
                (i for c in cs for i in lists[c]), key=rank.__getitem__)
            merged[key] = members
        result.append(members)
    return result
