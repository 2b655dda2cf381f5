"""``roundrobin``: deal all partitions in (topic, partition) order around the members.

Kafka's RoundRobinAssignor: members are ordered as in ``range`` (static members by instance
id first); each partition goes to the next member in the circle that subscribes to its
topic. With identical subscriptions the result is balanced; with different ones it may not be.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.assignors._gc import gc_paused
from samsa.assignors._model import Model
from samsa.assignors.interface import (
    Assignment,
    Assignor,
    ClusterView,
    Subscription,
    register_assignor,
)
from samsa.assignors.range_assignor import member_sort_key

__all__ = ["RoundRobinAssignor"]


@register_assignor
class RoundRobinAssignor(Assignor):
    """Kafka's ``roundrobin`` strategy."""

    name = "roundrobin"

    @gc_paused()
    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        index = {member: m for m, member in enumerate(model.member_ids)}
        circle = [
            index[mid]
            for mid in sorted(index, key=lambda mid: member_sort_key(mid, subscriptions[mid]))
        ]
        subscribed = [set(ts) for ts in model.member_topics]
        out: list[list[int]] = [[] for _ in circle]
        size = len(circle)
        pos = 0
        for t, n in enumerate(model.counts):
            if not model.topic_members[t]:
                continue
            base = model.offsets[t]
            for g in range(base, base + n):
                while t not in subscribed[circle[pos]]:
                    pos = (pos + 1) % size
                out[circle[pos]].append(g)
                pos = (pos + 1) % size
        return model.answer(out, subscriptions)
