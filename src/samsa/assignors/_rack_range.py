"""Rack-aware ``range`` as Kafka's ``RangeAssignor`` does it (KIP-881).

Each topic keeps range's quota: ``n // c`` partitions per member, one more for the first
``n % c`` members to reach it. A first pass gives members partitions on their own rack, in
member order and up to their quota (topics with the same members and partition count go
partition by partition, so co-partitioning survives); a second pass deals what is left as
plain range does. Members without a rack match every partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from samsa.assignors._model import Model, rack_aware


class _Topic:
    """Range bookkeeping of one topic (Kafka's ``TopicAssignmentState``)."""

    __slots__ = ("assigned", "base", "extra", "members", "needs", "per", "racks", "unassigned")

    def __init__(self, base: int, members: list[int], racks: Sequence[frozenset[str]],
                 needs: bool) -> None:
        self.base = base
        self.members = members
        self.racks = racks
        self.needs = needs
        self.per, self.extra = divmod(len(racks), len(members)) if members else (0, 0)
        self.assigned = dict.fromkeys(members, 0)
        self.unassigned: dict[int, None] = dict.fromkeys(range(len(racks)))

    def room(self, m: int) -> int:
        return max(0, self.per + (1 if self.extra > 0 else 0) - self.assigned[m])

    def matches(self, rack: str | None, p: int) -> bool:
        return rack is None or rack in self.racks[p]

    def give(self, m: int, partitions: list[int], out: list[list[int]]) -> None:
        before = self.assigned[m]
        for p in partitions:
            del self.unassigned[p]
            out[m].append(self.base + p)
        self.assigned[m] = before + len(partitions)
        if before <= self.per < self.assigned[m]:
            self.extra -= 1


def _ranges(topic: _Topic, racks: Sequence[str | None] | None, out: list[list[int]]) -> None:
    """Each member in order takes up to its room of the free partitions (rack-matched ones
    only when ``racks`` is given)."""
    for m in topic.members:
        if not topic.unassigned:
            break
        room = topic.room(m)
        if room <= 0:
            continue
        free = iter(topic.unassigned)
        if racks is not None:
            rack = racks[m]
            free = (p for p in topic.unassigned if topic.matches(rack, p))
        taken = list(islice(free, room))
        if taken:
            topic.give(m, taken, out)


def _co_partitioned(topics: list[_Topic], racks: Sequence[str | None],
                    out: list[list[int]]) -> None:
    """Partition ``p`` of every topic to the first member on a rack of all of them."""
    remaining = list(topics[0].members)
    for p in range(len(topics[0].racks)):
        chosen = next((m for m in remaining
                       if all(t.matches(racks[m], p) and t.room(m) > 0 for t in topics)), None)
        if chosen is None:
            continue
        for t in topics:
            t.give(chosen, [p], out)
        if all(t.room(chosen) == 0 for t in topics):
            remaining.remove(chosen)
            if not remaining:
                break


def rack_range(model: Model, members_per_topic: list[list[int]],
               partition_racks: Sequence[Sequence[frozenset[str]]]) -> list[list[int]] | None:
    """Kafka's rack-aware range, or None when no topic calls for racks (plain range then).

    ``members_per_topic[t]`` lists topic ``t``'s members in range order.
    """
    racks = [r or None for r in model.racks]
    topics: list[_Topic] = []
    for t, members in enumerate(members_per_topic):
        member_racks = {r for m in members if (r := racks[m]) is not None}
        needs = bool(member_racks) and rack_aware(member_racks, partition_racks[t])
        topics.append(_Topic(model.offsets[t], members, partition_racks[t], needs))
    if not any(t.needs for t in topics):
        return None
    out: list[list[int]] = [[] for _ in model.member_ids]
    groups: dict[tuple[tuple[int, ...], int], list[_Topic]] = {}
    for topic in topics:
        if topic.members:
            groups.setdefault((tuple(topic.members), len(topic.racks)), []).append(topic)
    for group in groups.values():
        if len(group) > 1:
            _co_partitioned(group, racks, out)
        elif group[0].needs:
            _ranges(group[0], racks, out)
    for topic in topics:
        _ranges(topic, None, out)
    return out
