"""Shared steps of the server-side assignors: inputs in a fixed order, the valid current
assignment, rack matching and the result's shape."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from samsa.assignors.server.interface import GroupSpec, MemberSpec, TopicsView

#: One member's partitions while an assignor works: topic id -> partitions.
Owned = dict[uuid.UUID, frozenset[int]]


@dataclass(slots=True)
class Inputs:
    """The group in a deterministic order: members sorted by id, topics by id."""

    members: list[MemberSpec]
    subscribed: list[frozenset[uuid.UUID]]
    """Each member's subscribed topics that exist in the topics view."""
    counts: dict[uuid.UUID, int]
    """Partition count of every topic some member subscribes to."""

    @property
    def member_ids(self) -> list[str]:
        return [m.member_id for m in self.members]

    def homogeneous(self) -> bool:
        """True when every member subscribes to the same topics."""
        first = self.subscribed[0] if self.subscribed else frozenset()
        return all(s == first for s in self.subscribed)


def prepare(group: GroupSpec, topics: TopicsView) -> Inputs:
    """Sort the members, drop subscriptions to topics the view does not know."""
    members = [group.members[m] for m in sorted(group.members)]
    subscribed = []
    counts: dict[uuid.UUID, int] = {}
    # Members mostly share a few subscriptions: each distinct one is checked once (hashing
    # a UUID is a Python-level call, worth avoiding a million times).
    known: dict[frozenset[uuid.UUID], frozenset[uuid.UUID]] = {}
    for m in members:
        subs = known.get(m.subscribed)
        if subs is None:
            subs = m.subscribed
            if not subs <= topics.keys():
                subs = frozenset(t for t in subs if t in topics)
            known[m.subscribed] = subs
            for t in subs:
                counts[t] = topics[t].partitions
        subscribed.append(subs)
    return Inputs(members, subscribed, counts)


def valid_current(group: GroupSpec, inputs: Inputs) -> list[Owned]:
    """Each member's current partitions that it may keep: subscribed, existing, and not
    already claimed by a member earlier in the order (the current assignment should never
    have two owners, but the assignor does not rely on it)."""
    counts = inputs.counts
    claimed: dict[uuid.UUID, set[int]] = {}
    result: list[Owned] = []
    for member, subs in zip(inputs.members, inputs.subscribed, strict=True):
        owned: Owned = {}
        for tid, parts in group.current.get(member.member_id, {}).items():
            if not parts or tid not in subs:
                continue
            n = counts[tid]
            if min(parts) < 0 or max(parts) >= n:
                parts = frozenset(p for p in parts if 0 <= p < n)
            seen = claimed.get(tid)
            if seen is None:
                claimed[tid] = set(parts)
            elif seen.isdisjoint(parts):
                seen |= parts
            else:
                parts = parts - seen
                seen |= parts
            if parts:
                owned[tid] = frozenset(parts)
        result.append(owned)
    return result


def topic_order(topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """Topics in a fixed order (by id)."""
    return sorted(topic_ids, key=lambda t: t.int)


class Racks:
    """Rack matching, used only when it can make a difference (as Kafka decides): some
    member sends a rack, some partition has replica racks on a member rack, and the
    partitions do not all have the same replica racks."""

    def __init__(self, inputs: Inputs, topics: TopicsView) -> None:
        self.member_rack: list[str | None] = [m.rack_id or None for m in inputs.members]
        member_racks = {r for r in self.member_rack if r is not None}
        self.partition_racks: dict[uuid.UUID, Mapping[int, frozenset[str]]] = {}
        shapes: set[frozenset[str]] = set()
        seen_racks: set[str] = set()
        if member_racks:
            for tid, n in inputs.counts.items():
                racks = topics[tid].racks
                if racks:
                    self.partition_racks[tid] = racks
                    for p, rs in racks.items():
                        if 0 <= p < n and rs:
                            shapes.add(rs)
                            seen_racks |= rs
        self.active = bool(member_racks & seen_racks) and len(shapes) > 1
        self.member_racks = member_racks

    def racks_of(self, tid: uuid.UUID, partition: int) -> frozenset[str]:
        racks = self.partition_racks.get(tid)
        if racks is None:
            return frozenset()
        return racks.get(partition, frozenset())

    def mismatched(self, member: int, tid: uuid.UUID, partition: int) -> bool:
        """The member has a rack, the partition has replica racks, and they differ."""
        rack = self.member_rack[member]
        if rack is None:
            return False
        racks = self.racks_of(tid, partition)
        return bool(racks) and rack not in racks

    def matches(self, member: int, tid: uuid.UUID, partition: int) -> bool:
        rack = self.member_rack[member]
        return rack is not None and rack in self.racks_of(tid, partition)


def finish(inputs: Inputs, owned: Sequence[Mapping[uuid.UUID, AbstractSet[int]]]
           ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The result: every member, each non-empty topic as a frozenset."""
    return {
        m.member_id: {
            t: ps if isinstance(ps, frozenset) else frozenset(ps)
            for t, ps in o.items() if ps
        }
        for m, o in zip(inputs.members, owned, strict=True)
    }
