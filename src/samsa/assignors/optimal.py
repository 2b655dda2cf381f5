"""``optimal``: the best possible balance for any subscriptions, then the most stickiness.

Balance is lexicographic: minimise the largest member load, then the next largest, and so on
("decreasingly minimal"). The feasible load vectors of a bipartite (topic -> member) transport
problem form an M-convex set, and on such sets an element is decreasingly minimal exactly when
it minimises the sum of squared loads (Frank & Murota, *Discrete decreasing minimization*).
So one min-cost flow solves it:

    source -> topic t        capacity n_t
    topic t -> member m      capacity o_tm at cost -1 (keeping owned partitions)
                             capacity n_t - o_tm at cost 0   (for every subscription)
    member m -> sink         k-th unit at cost W * (2k - 1)  (so a load L costs W * L^2)

with ``W > P`` so that balance always beats stickiness. The network matrix is totally
unimodular, so the solver's flows are integral. The solver is OR-Tools' ``SimpleMinCostFlow``.
Flows give counts per (topic, member); partitions are then placed keeping current owners.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from samsa.assignors._gc import gc_paused
from samsa.assignors._model import Model
from samsa.assignors._placement import place_counts
from samsa.assignors.interface import (
    Assignment,
    ClusterView,
    Subscription,
    register_assignor,
)
from samsa.assignors.sticky import StickyAssignor, general_counts, owned_counts

__all__ = ["OptimalAssignor", "optimal_counts"]


def optimal_counts(model: Model, owner: Sequence[int]) -> list[dict[int, int]]:
    """Per-(topic, member) counts: lexicographically balanced, then most owned kept."""
    # Imported here: the broker imports samsa.assignors (KIP-848's server-side assignors)
    # but never this solver, and numpy + OR-Tools would add ~35 MB to its resident size.
    import numpy as np
    from ortools.graph.python import min_cost_flow

    topics, members = len(model.topics), len(model.member_ids)
    owned = owned_counts(model, owner)
    # Any balanced assignment bounds the optimum's largest load: no tier above it is needed.
    balanced_load = [0] * members
    for xt in general_counts(model, owner):
        for m, k in xt.items():
            balanced_load[m] += k
    bound = max(balanced_load, default=0)
    source, sink = topics + members, topics + members + 1
    tails: list[int] = []
    heads: list[int] = []
    caps: list[int] = []
    costs: list[int] = []
    edges: list[tuple[int, int]] = []  # (topic, member) per flow arc, in arc order
    for t, n in enumerate(model.counts):
        if not model.topic_members[t]:
            continue
        tails.append(source)
        heads.append(t)
        caps.append(n)
        costs.append(0)
    first_edge = len(tails)
    for t, n in enumerate(model.counts):
        for m in model.topic_members[t]:
            keep = owned[t].get(m, 0)
            for cap, cost in ((keep, -1), (n - keep, 0)):
                if cap:
                    tails.append(t)
                    heads.append(topics + m)
                    caps.append(cap)
                    costs.append(cost)
                    edges.append((t, m))
    weight = model.total + 1
    for m in range(members):
        reach = sum(model.counts[t] for t in model.member_topics[m])
        for k in range(1, min(reach, bound) + 1):
            tails.append(topics + m)
            heads.append(sink)
            caps.append(1)
            costs.append(weight * (2 * k - 1))
    flow = min_cost_flow.SimpleMinCostFlow()
    flow.add_arcs_with_capacity_and_unit_cost(
        np.array(tails, dtype=np.int32),
        np.array(heads, dtype=np.int32),
        np.array(caps, dtype=np.int64),
        np.array(costs, dtype=np.int64),
    )
    supply = sum(model.counts[t] for t in range(topics) if model.topic_members[t])
    flow.set_node_supply(source, supply)
    flow.set_node_supply(sink, -supply)
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise RuntimeError(f"optimal assignor: min-cost flow status {status}")
    arcs = np.arange(first_edge, first_edge + len(edges), dtype=np.int32)
    x: list[dict[int, int]] = [{} for _ in range(topics)]
    for (t, m), f in zip(edges, flow.flows(arcs).tolist(), strict=True):
        if f:
            x[t][m] = x[t].get(m, 0) + int(f)
    return [dict(sorted(xt.items())) for xt in x]


@register_assignor
class OptimalAssignor(StickyAssignor):
    """samsa's ``optimal`` strategy (eager; the previous assignment travels as sticky user data)."""

    name = "optimal"

    @gc_paused()
    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        owner = self._owners(model, subscriptions)
        if not model.member_ids or not model.total:
            return model.answer([[] for _ in model.member_ids], subscriptions)
        counts = optimal_counts(model, owner)
        out = place_counts(model, counts, owner, model.partition_racks(cluster))
        return model.answer(out, subscriptions)
