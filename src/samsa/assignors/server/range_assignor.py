"""The ``range`` server-side assignor: contiguous ranges per topic, co-partitioned."""

from __future__ import annotations

import uuid

from samsa.assignors.server._common import prepare, topic_order
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
        inputs = prepare(group, topics)
        order = sorted(range(len(inputs.members)),
                       key=lambda i: _member_order(inputs.members[i]))
        subscribers: dict[uuid.UUID, list[int]] = {}
        for i in order:
            for t in inputs.subscribed[i]:
                subscribers.setdefault(t, []).append(i)
        out: list[dict[uuid.UUID, frozenset[int]]] = [{} for _ in inputs.members]
        for t in topic_order(subscribers):
            members = subscribers[t]
            q, r = divmod(inputs.counts[t], len(members))
            start = 0
            for k, i in enumerate(members):
                size = q + 1 if k < r else q
                if size:
                    out[i][t] = frozenset(range(start, start + size))
                    start += size
        return {m.member_id: o for m, o in zip(inputs.members, out, strict=True)}
