"""What-if planning: run a strategy on plain dictionaries (used by ``samsa groups plan``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from samsa import TopicPartition
from samsa.assignors.interface import (
    Assignor,
    ClusterView,
    Subscription,
    resolve_assignor,
)

__all__ = ["plan"]


def plan(
    strategy: str | type[Assignor] | Assignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Iterable[str]],
    *,
    owned: Mapping[str, Iterable[tuple[str, int]]] | None = None,
    racks: Mapping[str, str | None] | None = None,
    partition_racks: Mapping[str, Sequence[Iterable[str]]] | None = None,
    generation: int = 1,
) -> dict[str, list[TopicPartition]]:
    """Assign ``partitions_per_topic`` to members with ``strategy``.

    ``subscriptions`` maps member id -> topics, ``owned`` member id -> (topic, partition)
    pairs it holds now (claimed at ``generation``), ``racks`` member id -> rack, and
    ``partition_racks`` topic -> per-partition replica racks. Returns member id -> sorted
    partitions.
    """
    assignor = resolve_assignor(strategy)
    owned = owned or {}
    racks = racks or {}
    subs = {
        member: Subscription(
            topics=tuple(sorted(set(topics))),
            owned_partitions=tuple(
                sorted(TopicPartition(t, int(p)) for t, p in owned.get(member, ()))
            ),
            generation_id=generation if owned.get(member) else -1,
            rack_id=racks.get(member),
        )
        for member, topics in subscriptions.items()
    }
    cluster = ClusterView(
        dict(partitions_per_topic),
        {t: [frozenset(r) for r in rs] for t, rs in (partition_racks or {}).items()},
    )
    result = assignor.assign(cluster, subs)
    return {member: sorted(result[member].partitions) for member in subscriptions}
