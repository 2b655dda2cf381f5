"""Turn per-(topic, member) counts into concrete partitions.

Strategies that decide *how many* partitions of each topic a member gets (sticky's general
path, optimal) use :func:`place_topic` to decide *which* ones: current
owners keep their partitions first, then same-rack members get same-rack partitions, then the
rest are dealt in partition order.
"""

from __future__ import annotations

from collections.abc import Sequence

from samsa.assignors._model import Model


def place_topic(
    base: int,
    n: int,
    targets: Sequence[tuple[int, int]],
    out: list[list[int]],
    owner: Sequence[int] | None = None,
    member_racks: Sequence[str | None] | None = None,
    partition_racks: Sequence[frozenset[str]] | None = None,
) -> None:
    """Append partitions ``base .. base+n-1`` to ``out[member]``, ``count`` for each target.

    ``targets`` lists (member, count) in member order; counts must add up to ``n``.
    """
    need = dict(targets)
    free: list[int]
    if owner is None:
        free = list(range(base, base + n))
    elif member_racks is None or partition_racks is None:
        free = []
        keep = free.append
        wants = need.get
        for g in range(base, base + n):
            m = owner[g]
            if m >= 0 and wants(m, 0) > 0:
                out[m].append(g)
                need[m] -= 1
            else:
                keep(g)
    else:
        free = []
        for g in range(base, base + n):
            m = owner[g]
            if (
                m >= 0
                and need.get(m, 0) > 0
                and _same_rack(member_racks[m], partition_racks[g - base])
            ):
                out[m].append(g)
                need[m] -= 1
            else:
                free.append(g)
    if member_racks is not None and partition_racks is not None:
        free = _place_same_rack(base, free, need, out, owner, member_racks, partition_racks)
    pos = 0
    for m, _ in targets:
        k = need[m]
        if k > 0:
            out[m].extend(free[pos : pos + k])
            pos += k
    if pos != len(free):
        raise AssertionError(f"placement: {len(free) - pos} partitions left over")


def _same_rack(rack: str | None, replica_racks: frozenset[str]) -> bool:
    """True when the member's rack holds a replica (or either side is unknown)."""
    return rack is None or not replica_racks or rack in replica_racks


def _place_same_rack(
    base: int,
    free: list[int],
    need: dict[int, int],
    out: list[list[int]],
    owner: Sequence[int] | None,
    member_racks: Sequence[str | None],
    partition_racks: Sequence[frozenset[str]],
) -> list[int]:
    """Give members same-rack free partitions, then let owners keep mismatched ones."""
    by_rack: dict[str, list[int]] = {}
    # Partitions replicated on few racks first: they have the fewest same-rack takers.
    for g in sorted(free, key=lambda g: (len(partition_racks[g - base]), g)):
        for r in sorted(partition_racks[g - base]):
            by_rack.setdefault(r, []).append(g)
    taken: set[int] = set()
    for m in need:
        rack = member_racks[m]
        if rack is None or need[m] <= 0 or not by_rack.get(rack):
            continue
        candidates = by_rack[rack]
        kept = []
        for g in candidates:
            if need[m] > 0 and g not in taken:
                taken.add(g)
                out[m].append(g)
                need[m] -= 1
            elif g not in taken:
                kept.append(g)
        by_rack[rack] = kept
    rest = []
    for g in free:
        if g in taken:
            continue
        m = owner[g] if owner is not None else -1
        if m >= 0 and need.get(m, 0) > 0:
            out[m].append(g)
            need[m] -= 1
        else:
            rest.append(g)
    return rest


def place_counts(
    model: Model,
    counts: Sequence[dict[int, int]],
    owner: Sequence[int] | None,
    partition_racks: Sequence[Sequence[frozenset[str]]] | None,
) -> list[list[int]]:
    """Place every topic given ``counts[topic][member]``; returns per-member indices.

    Leftover partitions are dealt in the dicts' order (callers order them by member).
    """
    out: list[list[int]] = [[] for _ in model.member_ids]
    member_racks = model.racks if partition_racks is not None else None
    for t, n in enumerate(model.counts):
        targets = [(m, k) for m, k in counts[t].items() if k > 0]
        base = model.offsets[t]
        topic_owner = owner
        if owner is not None and max(owner[base : base + n], default=-1) < 0:
            topic_owner = None
        place_topic(
            base,
            n,
            targets,
            out,
            topic_owner,
            member_racks,
            partition_racks[t] if partition_racks is not None else None,
        )
    return out
