"""The share groups' server assignor, ``simple`` (Kafka's ``SimpleAssignor``): balanced
first, then sticky to the previous target assignment; a partition may go to several members.

A set of partitions is shared by a set of members: every partition gets ``sharing =
ceil(members / partitions)`` members (one when there are at least as many partitions as
members), and the ``sharing * partitions`` places are split over the members so that two
members' counts differ by at most one. Within that, each member keeps what its previous
target gave it:

1. a member keeps its previous partitions that are still in the set;
2. a partition kept by more than ``sharing`` members is taken from the fullest of them;
3. a member keeping more than its count gives up the partitions shared the most;
4. partitions with fewer than ``sharing`` members go to the members below their count,
   the emptiest first.

So a member that joins takes partitions from the others and nobody else's partitions
move; a member whose new target has not reached it yet (a member takes its target at its
next heartbeat) still holds a superset of it, and every partition keeps a reader.

As Kafka, when every member subscribes to the same topics (homogeneous) all their
partitions form one set; otherwise (heterogeneous) each topic's partitions are shared by
the members subscribing to it. Racks are not weighed (as Kafka's). Ties go to the member
id and partition order, so the result is deterministic (Kafka's follows hash order).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from samsa.assignors.server.interface import TopicInfo
from samsa.coordinator.share.group import Assignment

#: (topic id, partition)
Part = tuple[uuid.UUID, int]


def assign(subscriptions: Mapping[str, tuple[str, ...]],
           topics: Mapping[str, TopicInfo],
           previous: Mapping[str, Assignment] | None = None) -> dict[str, Assignment]:
    """Member id -> its assignment, from each member's subscribed topic names, the topics
    that exist (by name) and the previous target assignment (member id -> assignment)."""
    before = {m: {(t, p) for t, ps in a.items() for p in ps}
              for m, a in (previous or {}).items()}
    given: dict[str, set[Part]] = {m: set() for m in subscriptions}
    subscribed = {frozenset(names) for names in subscriptions.values()}
    if len(subscribed) == 1:  # homogeneous
        parts = _partitions(next(iter(subscribed)), topics)
        given.update(_share(parts, sorted(subscriptions), before, {}))
    else:
        for name in sorted({t for names in subscriptions.values() for t in names}):
            members = sorted(m for m, names in subscriptions.items() if name in names)
            load = {m: len(given[m]) for m in members}
            for m, got in _share(_partitions((name,), topics), members, before, load).items():
                given[m] |= got
    return {m: _as_assignment(got) for m, got in given.items()}


def _partitions(names: Iterable[str], topics: Mapping[str, TopicInfo]) -> list[Part]:
    return sorted((info.topic_id, p) for name in names
                  if (info := topics.get(name)) is not None
                  for p in range(info.partitions))


def _as_assignment(parts: set[Part]) -> Assignment:
    out: dict[uuid.UUID, list[int]] = {}
    for t, p in sorted(parts):
        out.setdefault(t, []).append(p)
    return {t: tuple(ps) for t, ps in out.items()}


def _share(parts: list[Part], members: list[str], before: Mapping[str, set[Part]],
           load: Mapping[str, int]) -> dict[str, set[Part]]:
    """Each of ``members`` (sorted) -> its partitions of ``parts`` (sorted); ``load``: what
    each member got from other topics (a heterogeneous group's)."""
    if not parts or not members:
        return {m: set() for m in members}
    sharing = -(-len(members) // len(parts))
    base, extra = divmod(sharing * len(parts), len(members))
    valid = set(parts)
    kept = {m: before.get(m, set()) & valid for m in members}
    # 1. the members keeping the most (then with the least elsewhere) get the larger counts
    by_kept = sorted(members, key=lambda m: (-len(kept[m]), load.get(m, 0), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
    holders: dict[Part, set[str]] = {p: set() for p in parts}
    for m in members:
        for p in kept[m]:
            holders[p].add(m)
    # 2. over-shared partitions leave the fullest members first
    for p in parts:
        while len(holders[p]) > sharing:
            m = min(holders[p], key=lambda m: (quota[m] - len(kept[m]), m))
            holders[p].discard(m)
            kept[m].discard(p)
    # 3. over-full members give up their most shared partitions
    for m in members:
        for p in sorted(kept[m], key=lambda p: (-len(holders[p]), p))[:max(
                0, len(kept[m]) - quota[m])]:
            holders[p].discard(m)
            kept[m].discard(p)
    # 4. under-shared partitions go to the members with the most room
    for p in sorted(parts, key=lambda p: (len(holders[p]), p)):
        while len(holders[p]) < sharing:
            room = [m for m in members if len(kept[m]) < quota[m]]
            free = [m for m in room if m not in holders[p]]
            if free:
                m = min(free, key=lambda m: (len(kept[m]) - quota[m], m))
            else:  # every member with room holds p already: trade with a full member
                m = _trade(p, room[0], members, kept, holders)
            holders[p].add(m)
            kept[m].add(p)
    return kept


def _trade(p: Part, taker: str, members: list[str], kept: dict[str, set[Part]],
           holders: dict[Part, set[str]]) -> str:
    """A full member not holding ``p`` hands one of its partitions that ``taker`` lacks to
    ``taker``; that member is returned, to take ``p``."""
    for m in members:
        if m == taker or p in kept[m]:
            continue
        for q in sorted(kept[m] - kept[taker]):
            kept[m].discard(q)
            holders[q].discard(m)
            kept[taker].add(q)
            holders[q].add(taker)
            return m
    raise AssertionError(f"no member can take {p}")  # sharing <= members rules it out
