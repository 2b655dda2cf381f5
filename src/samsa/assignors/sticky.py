"""``sticky``: balanced first, then as few moves as possible (Kafka's StickyAssignor).

Two paths, as in Kafka's ``AbstractStickyAssignor``:

* **constrained** (every member subscribes to the same topics): each member keeps up to its
  quota of the partitions it owns (``floor(P/N)``, or one more for the first ``P % N``
  members that own that many), the rest are dealt round-robin in (topic, partition) order to
  members below ``floor(P/N)``, then one each to members at ``floor(P/N)``;
* **general**: counts per (topic, member) start from what members own; unowned partitions go,
  topic by topic (topics with the fewest subscribers first), to the least loaded subscribers;
  then units move from a member to one with at least two fewer partitions that subscribes to
  the same topic until no such pair is left (Kafka's balance criterion). Counts are turned
  into partitions keeping current owners first (:mod:`samsa.assignors._placement`).

Ownership claims: the highest generation wins; two members claiming a partition in the same
generation both lose it. With member and replica racks the general path is used with
same-rack placement (KIP-881).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from samsa import TopicPartition
from samsa.assignors._model import Model
from samsa.assignors._placement import place_counts
from samsa.assignors.codec import (
    ConsumerProtocolError,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from samsa.assignors.interface import (
    Assignment,
    Assignor,
    ClusterView,
    Subscription,
    register_assignor,
)

__all__ = ["StickyAssignor", "general_counts", "owned_counts", "sticky_assign"]


def owned_counts(model: Model, owner: Sequence[int]) -> list[dict[int, int]]:
    """Per topic: member -> number of partitions it validly owns."""
    result: list[dict[int, int]] = []
    for t, n in enumerate(model.counts):
        base = model.offsets[t]
        counter = Counter(owner[base : base + n])
        result.append({m: k for m, k in sorted(counter.items()) if m >= 0})
    return result


def _waterfill(members: Sequence[int], load: list[int], units: int, xt: dict[int, int]) -> None:
    """Give ``units`` one by one to the least loaded of ``members`` (ties: lowest index)."""
    order = sorted(members, key=load.__getitem__)
    size = len(order)
    g, prefix = 1, load[order[0]]
    while g < size and g * load[order[g]] - prefix <= units:
        prefix += load[order[g]]
        g += 1
    level, rem = divmod(units + prefix, g)
    for i, m in enumerate(sorted(order[:g])):
        add = level - load[m] + (1 if i < rem else 0)
        if add:
            xt[m] = xt.get(m, 0) + add
            load[m] += add


def general_counts(model: Model, owner: Sequence[int]) -> list[dict[int, int]]:
    """Balanced per-(topic, member) counts that keep as much current ownership as they can."""
    x = owned_counts(model, owner)
    load = [0] * len(model.member_ids)
    for xt in x:
        for m, k in xt.items():
            load[m] += k
    for t in sorted(range(len(model.topics)), key=lambda t: len(model.topic_members[t])):
        units = model.counts[t] - sum(x[t].values())
        if units and model.topic_members[t]:
            _waterfill(model.topic_members[t], load, units, x[t])
    owned = owned_counts(model, owner)
    # Units that are owned, or were placed by a side move, are "pinned": side moves only
    # shift free units, and each side move pins the unit it places, so they cannot cycle.
    pinned = [dict(o) for o in owned]
    moved = True
    while moved:
        moved = False
        for t, xt in enumerate(x):
            subscribers = model.topic_members[t]
            while xt:
                a = max(xt, key=load.__getitem__)
                b = min(subscribers, key=load.__getitem__)
                gap = load[a] - load[b]
                if gap < 2:
                    break
                if xt[a] <= owned[t].get(a, 0) and _side_move(model, x, pinned, load, a, b):
                    # a would give up a partition it owns; instead b was lifted, or a
                    # relieved, with a partition its holder got only in this round.
                    moved = True
                    continue
                _move(xt, load, a, b, min(xt[a], gap // 2))
                moved = True
    return [dict(sorted(xt.items())) for xt in x]


def _side_move(
    model: Model,
    x: Sequence[dict[int, int]],
    pinned: Sequence[dict[int, int]],
    load: list[int],
    a: int,
    b: int,
) -> bool:
    """Move one free unit into ``b`` or out of ``a`` without unbalancing; pin it."""
    found = _free_donor(model, x, pinned, load, b)
    if found is not None:
        donor, s = found
        _move(x[s], load, donor, b, 1)
        pinned[s][b] = pinned[s].get(b, 0) + 1
        return True
    found = _free_receiver(model, x, pinned, load, a)
    if found is not None:
        receiver, s = found
        _move(x[s], load, a, receiver, 1)
        pinned[s][receiver] = pinned[s].get(receiver, 0) + 1
        return True
    return False


def _move(xt: dict[int, int], load: list[int], a: int, b: int, k: int) -> None:
    xt[a] -= k
    if not xt[a]:
        del xt[a]
    xt[b] = xt.get(b, 0) + k
    load[a] -= k
    load[b] += k


def _free_receiver(
    model: Model,
    x: Sequence[dict[int, int]],
    pinned: Sequence[dict[int, int]],
    load: Sequence[int],
    a: int,
) -> tuple[int, int] | None:
    """(member, topic): the least loaded member below ``load[a]`` that subscribes to a topic
    of which ``a`` holds a free (not pinned) unit."""
    best: tuple[int, int] | None = None
    for s, xs in enumerate(x):
        if xs.get(a, 0) > pinned[s].get(a, 0):
            c = min(model.topic_members[s], key=load.__getitem__)
            if load[c] < load[a] and (best is None or load[c] < load[best[0]]):
                best = (c, s)
    return best


def _free_donor(
    model: Model,
    x: Sequence[dict[int, int]],
    pinned: Sequence[dict[int, int]],
    load: Sequence[int],
    b: int,
) -> tuple[int, int] | None:
    """(member, topic): the most loaded member above ``load[b]`` holding a free (not pinned)
    unit of a topic ``b`` subscribes to."""
    best: tuple[int, int] | None = None
    for s in model.member_topics[b]:
        for c, k in x[s].items():
            if (
                c != b
                and k > pinned[s].get(c, 0)
                and load[c] > load[b]
                and (best is None or load[c] > load[best[0]])
            ):
                best = (c, s)
    return best


def _constrained(model: Model, owner: Sequence[int]) -> list[list[int]]:
    """Kafka's constrained assignment for identical subscriptions."""
    size = len(model.member_ids)
    total = model.total
    minq, extra = divmod(total, size)
    maxq = minq + (1 if extra else 0)
    owned: list[list[int]] = [[] for _ in range(size)]
    free: list[int] = []
    for g, m in enumerate(owner):
        if m >= 0:
            owned[m].append(g)
        else:
            free.append(g)
    out: list[list[int]] = []
    slots = extra
    queue: list[int] = []  # members at exactly minq, in the order they got there
    for m in range(size):
        mine = owned[m]
        if len(mine) > minq and slots > 0:
            keep = maxq
            slots -= 1
        else:
            keep = min(len(mine), minq)
        out.append(mine[:keep])
        free.extend(mine[keep:])
        if keep == minq:
            queue.append(m)
    free.sort()
    pos, done = 0, 0
    active = [m for m in range(size) if len(out[m]) < minq]
    deficit = {m: minq - len(out[m]) for m in active}
    while active:
        width = len(active)
        rounds = min(deficit[m] for m in active) - done
        for i, m in enumerate(active):
            out[m].extend(free[pos + i : pos + rounds * width : width])
        pos += rounds * width
        done += rounds
        queue.extend(m for m in active if deficit[m] == done)
        active = [m for m in active if deficit[m] > done]
    for m, g in zip(queue, free[pos:], strict=False):
        out[m].append(g)
    if pos + len(queue) < len(free):
        raise AssertionError("constrained sticky: partitions left unassigned")
    return out


def sticky_assign(
    model: Model, owner: Sequence[int], cluster: ClusterView
) -> list[list[int]]:
    """Sticky assignment as per-member global partition indices."""
    if not model.member_ids or not model.total:
        return [[] for _ in model.member_ids]
    racks = model.partition_racks(cluster)
    if racks is None and model.uniform:
        return _constrained(model, owner)
    return place_counts(model, general_counts(model, owner), owner, racks)


def claims_from(
    subscription: Subscription, use_user_data: bool
) -> tuple[Iterable[TopicPartition], int]:
    """(owned partitions, generation) a member claims."""
    if use_user_data and subscription.user_data:
        try:
            data = decode_sticky_user_data(subscription.user_data)
        except ConsumerProtocolError:
            pass
        else:
            gen = data.generation if data.generation is not None else -1
            return data.partitions, gen
    generation = subscription.generation_id
    if generation < 0 and subscription.user_data and len(subscription.user_data) == 4:
        # CooperativeStickyAssignor writes its generation as user data (subscription v1).
        generation = struct.unpack(">i", subscription.user_data)[0]
    return subscription.owned_partitions, generation


@register_assignor
class StickyAssignor(Assignor):
    """Kafka's eager ``sticky`` strategy; previous assignment travels in user data."""

    name = "sticky"

    def __init__(self) -> None:
        self._partitions: tuple[TopicPartition, ...] | None = None
        self._generation = -1

    def user_data(self, topics: Sequence[str]) -> bytes | None:
        if self._partitions is None:
            return None
        return encode_sticky_user_data(self._partitions, self._generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._partitions = assignment.partitions
        self._generation = generation

    def _owners(self, model: Model, subscriptions: Mapping[str, Subscription]) -> list[int]:
        return model.resolve_owners(
            [claims_from(subscriptions[m], use_user_data=True) for m in model.member_ids]
        )

    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        owner = self._owners(model, subscriptions)
        return model.answer(sticky_assign(model, owner, cluster), subscriptions)
