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
from collections import Counter, deque
from collections.abc import Mapping, Sequence

from samsa import TopicPartition
from samsa.assignors._gc import gc_paused
from samsa.assignors._model import Claims, Model
from samsa.assignors._placement import place_counts
from samsa.assignors.codec import (
    ConsumerProtocolError,
    decode_sticky_groups,
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
    owned = owned_counts(model, owner)
    x = [dict(o) for o in owned]
    load = [0] * len(model.member_ids)
    for xt in x:
        for m, k in xt.items():
            load[m] += k
    for t in sorted(range(len(model.topics)), key=lambda t: len(model.topic_members[t])):
        units = model.counts[t] - sum(x[t].values())
        if units and model.topic_members[t]:
            _waterfill(model.topic_members[t], load, units, x[t])
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
                if xt[a] <= owned[t].get(a, 0) and (
                    _augment(model, x, owned, load, a, b) or _side_move(model, x, owned, load, a, b)
                ):
                    moved = True
                    continue
                _move(xt, load, a, b, min(xt[a], gap // 2))
                moved = True
    return [dict(sorted(xt.items())) for xt in x]


def _move(xt: dict[int, int], load: list[int], a: int, b: int, k: int) -> None:
    xt[a] -= k
    if not xt[a]:
        del xt[a]
    xt[b] = xt.get(b, 0) + k
    load[a] -= k
    load[b] += k


def _augment(
    model: Model,
    x: Sequence[dict[int, int]],
    owned: Sequence[dict[int, int]],
    load: list[int],
    a: int,
    b: int,
) -> bool:
    """Move free units along a path that takes one unit off ``a``, or puts one on ``b``.

    Searches breadth-first over members: ``u -> v`` when ``u`` holds a free unit of a topic
    ``v`` subscribes to. A path from ``a`` to a member at least two lighter (or into ``b``
    from a member at least two heavier) moves one unit per step; only the ends change load,
    and the sum of squared loads drops.
    """
    prev: dict[int, tuple[int, int] | None] = {a: None}
    queue = deque([a])
    while queue:
        u = queue.popleft()
        for s in model.member_topics[u]:
            if x[s].get(u, 0) <= owned[s].get(u, 0):
                continue
            for v in model.topic_members[s]:
                if v in prev:
                    continue
                prev[v] = (u, s)
                if load[v] <= load[a] - 2:
                    while (step := prev[v]) is not None:
                        _move(x[step[1]], load, step[0], v, 1)
                        v = step[0]
                    return True
                queue.append(v)
    nxt: dict[int, tuple[int, int] | None] = {b: None}
    queue = deque([b])
    while queue:
        v = queue.popleft()
        for s in model.member_topics[v]:
            for c, k in x[s].items():
                if c in nxt or k <= owned[s].get(c, 0):
                    continue
                nxt[c] = (v, s)
                if load[c] >= load[b] + 2:
                    while (step := nxt[c]) is not None:
                        _move(x[step[1]], load, c, step[0], 1)
                        c = step[0]
                    return True
                queue.append(c)
    return False


def _side_move(
    model: Model,
    x: Sequence[dict[int, int]],
    owned: Sequence[dict[int, int]],
    load: list[int],
    a: int,
    b: int,
) -> bool:
    """Narrow the gap between ``a`` and ``b`` by moving one *free* unit (one its holder does
    not own) into ``b`` or out of ``a``, so that ``a`` keeps the partitions it owns.

    The move may leave the two members' loads equal in sum of squares (a "neutral" move), so
    it must not worsen any pair: the receiver ends no more than one above any subscriber of
    the topics it holds, the giver no lower than one below any holder of its topics. Every
    side move therefore lowers the total excess of violating pairs, and the loop ends.
    """
    donors = sorted(
        ((load[c], c, s) for s in model.member_topics[b] for c, k in x[s].items()
         if c != b and k > owned[s].get(c, 0) and load[c] > load[b]),
        key=lambda e: (-e[0], e[1], e[2]),
    )
    for _, c, s in donors:
        if _can_give(model, x, load, c) and _can_take(model, x, load, b, s):
            _move(x[s], load, c, b, 1)
            return True
    receivers = sorted(
        (load[d], d, s) for s, xs in enumerate(x) if xs.get(a, 0) > owned[s].get(a, 0)
        for d in model.topic_members[s] if load[d] < load[a]
    )
    for _, d, s in receivers:
        if _can_give(model, x, load, a) and _can_take(model, x, load, d, s):
            _move(x[s], load, a, d, 1)
            return True
    return False


def _can_take(model: Model, x: Sequence[dict[int, int]], load: Sequence[int], d: int,
              s: int) -> bool:
    """After ``d`` gains a unit of ``s``, is it at most one above every co-subscriber?"""
    level = load[d]
    for t in model.member_topics[d]:
        if (t == s or x[t].get(d, 0) > 0) and any(
            load[m] < level for m in model.topic_members[t]
        ):
            return False
    return True


def _can_give(model: Model, x: Sequence[dict[int, int]], load: Sequence[int], c: int) -> bool:
    """After ``c`` loses a unit, is it at most one below every holder of its topics?"""
    level = load[c]
    return all(load[h] <= level for t in model.member_topics[c] for h in x[t] if h != c)


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
    subscription: Subscription, use_user_data: bool, names: dict[bytes, str] | None = None
) -> Claims:
    """The partitions a member claims, and the generation it claims them in.

    The eager strategies read the sticky user data (Java ``StickyAssignor``) and fall back to
    the subscription's owned partitions; cooperative reads the owned partitions, with the
    generation of subscription v2+ or, for v1, the 4-byte generation its user data carries.
    """
    if use_user_data and subscription.user_data:
        try:
            groups, gen = decode_sticky_groups(subscription.user_data, names)
        except ConsumerProtocolError:
            pass
        else:
            return Claims(gen if gen is not None else -1, groups=groups)
    generation = subscription.generation_id
    if generation < 0 and subscription.user_data and len(subscription.user_data) == 4:
        generation = struct.unpack(">i", subscription.user_data)[0]
    return Claims(generation, pairs=subscription.owned_partitions)


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
        names: dict[bytes, str] = {}
        return model.resolve_owners(
            [claims_from(subscriptions[m], True, names) for m in model.member_ids]
        )

    @gc_paused()
    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        owner = self._owners(model, subscriptions)
        return model.answer(sticky_assign(model, owner, cluster), subscriptions)
