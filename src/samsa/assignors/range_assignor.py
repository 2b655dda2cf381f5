"""``range``: each topic split in contiguous ranges over its members (Kafka's RangeAssignor).

For each topic, the members subscribed to it are ordered (static members by
``group.instance.id`` first, then by member id, as Kafka's ``MemberInfo``); with ``n``
partitions and ``c`` members the first ``n % c`` members get ``n // c + 1`` partitions and the
others ``n // c``. With member racks and replica racks (KIP-881) the same counts are kept but
members take same-rack partitions first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from samsa.assignors._model import Model
from samsa.assignors._placement import place_counts
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

    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        index = {member: m for m, member in enumerate(model.member_ids)}
        counts: list[dict[int, int]] = []
        for t, n in enumerate(model.counts):
            members = sorted(
                (model.member_ids[m] for m in model.topic_members[t]),
                key=lambda mid: member_sort_key(mid, subscriptions[mid]),
            )
            per, extra = divmod(n, len(members))
            # Dict order is range order: placement deals partitions in this order.
            counts.append(
                {index[mid]: per + (1 if i < extra else 0) for i, mid in enumerate(members)}
            )
        racks = model.partition_racks(cluster, per_topic=True)
        out = _place_in_order(model, counts, racks)
        return model.answer(out, subscriptions)


def _place_in_order(
    model: Model,
    counts: list[dict[int, int]],
    racks: list[Sequence[frozenset[str]]] | None,
) -> list[list[int]]:
    if racks is None:
        out: list[list[int]] = [[] for _ in model.member_ids]
        for t, per_member in enumerate(counts):
            pos = model.offsets[t]
            for m, k in per_member.items():
                out[m].extend(range(pos, pos + k))
                pos += k
        return out
    return place_counts(model, counts, None, racks)
