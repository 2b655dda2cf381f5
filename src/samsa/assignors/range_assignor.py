"""``range``: each topic split in contiguous ranges over its members (Kafka's RangeAssignor).

For each topic, the members subscribed to it are ordered (static members by
``group.instance.id`` first, then by member id, as Kafka's ``MemberInfo``); with ``n``
partitions and ``c`` members the first ``n % c`` members get ``n // c + 1`` partitions and the
others ``n // c``. With member racks and replica racks (KIP-881), when Kafka's rule calls for
them, members first take partitions on their own rack within the same quotas (see
:mod:`samsa.assignors._rack_range`); the extra partitions then go to whoever reached them first.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.assignors._gc import gc_paused
from samsa.assignors._model import Model
from samsa.assignors._rack_range import rack_range
from samsa.assignors.interface import (
    Assignment,
    Assignor,
    ClusterView,
    Subscription,
    java_order,
    register_assignor,
)

__all__ = ["RangeAssignor", "member_sort_key"]


def member_sort_key(member_id: str, subscription: Subscription) -> tuple[int, bytes, bytes]:
    """Kafka's ``MemberInfo`` order: static members (by instance id) before dynamic ones."""
    if subscription.group_instance_id is not None:
        return (0, java_order(subscription.group_instance_id), java_order(member_id))
    return (1, java_order(member_id), b"")


@register_assignor
class RangeAssignor(Assignor):
    """Kafka's ``range`` strategy."""

    name = "range"

    @gc_paused()
    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        index = {member: m for m, member in enumerate(model.member_ids)}
        members_per_topic = [
            [index[mid] for mid in sorted(
                (model.member_ids[m] for m in model.topic_members[t]),
                key=lambda mid: member_sort_key(mid, subscriptions[mid]),
            )]
            for t in range(len(model.topics))
        ]
        out = None
        if any(model.racks) and cluster.partition_racks:
            racks = [
                [cluster.racks_of(topic, p) for p in range(n)]
                for topic, n in zip(model.topics, model.counts, strict=True)
            ]
            out = rack_range(model, members_per_topic, racks)
        if out is None:
            out = [[] for _ in model.member_ids]
            for t, members in enumerate(members_per_topic):
                per, extra = divmod(model.counts[t], len(members))
                pos = model.offsets[t]
                for i, m in enumerate(members):
                    k = per + (1 if i < extra else 0)
                    out[m].extend(range(pos, pos + k))
                    pos += k
        return model.answer(out, subscriptions)
