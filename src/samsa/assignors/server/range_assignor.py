"""The ``range`` server-side assignor: contiguous ranges per topic, co-partitioned."""

from __future__ import annotations

import uuid

from samsa.assignors._gc import gc_paused
from samsa.assignors.server._common import prepare, subscribers_by_topic
from samsa.assignors.server.interface import GroupSpec, MemberSpec, ServerAssignor, TopicsView

__all__ = ["RangeAssignor"]


def _member_order(member: MemberSpec) -> tuple[int, str]:
    """Static members first, by instance id; then the others by member id."""
    if member.instance_id is not None:
        return (0, member.instance_id)
    return (1, member.member_id)


class RangeAssignor(ServerAssignor):
    """For each topic, its subscribers in a fixed order get contiguous ranges of its
    partitions, the first ``partitions % subscribers`` one partition more.

    Partition ``p`` of topics with the same partition count and the same subscribers goes to
    the same member (co-partitioning, for joins). As Kafka's server-side ``range``, the
    result depends only on the members and topics, not on the current assignment, and the
    order puts static members first by ``instance_id``: a static member that comes back with
    a new member id gets its old ranges back, and assigning again changes nothing.
    """

    name = "range"

    def assign(
        self, group: GroupSpec, topics: TopicsView
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        with gc_paused():
            return self._assign(group, topics)

    def _assign(
        self, group: GroupSpec, topics: TopicsView
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        inputs = prepare(group, topics)
        order = sorted(range(len(inputs.members)),
                       key=lambda i: _member_order(inputs.members[i]))
        counts, ids = inputs.counts, inputs.topics.ids
        out: list[dict[uuid.UUID, frozenset[int]]] = [{} for _ in inputs.members]
        # Co-partitioned topics get equal ranges: build each range once.
        ranges: dict[tuple[int, int], frozenset[int]] = {}
        for k, members in enumerate(subscribers_by_topic(inputs.subscribed, order, len(counts))):
            if not members:
                continue
            t = ids[k]
            q, r = divmod(counts[k], len(members))
            start = 0
            # With fewer partitions than members, only the first ``r`` get one.
            for j, i in enumerate(members if q else members[:r]):
                end = start + (q + 1 if j < r else q)
                parts = ranges.get((start, end))
                if parts is None:
                    parts = ranges[(start, end)] = frozenset(range(start, end))
                out[i][t] = parts
                start = end
        return {m.member_id: o for m, o in zip(inputs.members, out, strict=True)}
