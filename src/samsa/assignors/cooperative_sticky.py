"""``cooperative-sticky``: sticky plus incremental rebalancing (KIP-429).

The sticky assignment is computed from the partitions members report as owned (subscription
v1+, with the generation of v2+ or, for v1, the generation this assignor writes as user data).
A partition that would move to a new owner is withheld this round: the current owner sees it
missing from its assignment, revokes it and rejoins; the next rebalance assigns it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from samsa.assignors._gc import gc_paused
from samsa.assignors._model import Model
from samsa.assignors.interface import (
    Assignment,
    ClusterView,
    RebalanceProtocol,
    Subscription,
    register_assignor,
)
from samsa.assignors.sticky import StickyAssignor, claims_from, sticky_assign

__all__ = ["CooperativeStickyAssignor", "withhold_moves"]


def withhold_moves(
    per_member: list[list[int]], owner: Sequence[int], unsubscribed: Mapping[int, int]
) -> list[list[int]]:
    """Drop partitions assigned away from their current owner (disputed ones: from everyone).

    ``unsubscribed`` holds partitions still claimed by a member that dropped their topic; a
    Java or librdkafka consumer revokes those before rejoining, but we do not rely on it.
    """
    out = []
    for m, gs in enumerate(per_member):
        mine = [g for g in gs if owner[g] == m or owner[g] == -1]
        if unsubscribed:
            mine = [g for g in mine if unsubscribed.get(g, m) == m]
        out.append(mine)
    return out


@register_assignor
class CooperativeStickyAssignor(StickyAssignor):
    """Kafka's ``cooperative-sticky`` strategy."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def user_data(self, topics: Sequence[str]) -> bytes | None:
        return struct.pack(">i", self._generation)

    @gc_paused()
    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        unsubscribed: dict[int, int] = {}
        owner = model.resolve_owners(
            [claims_from(subscriptions[m], use_user_data=False) for m in model.member_ids],
            unsubscribed,
        )
        planned = sticky_assign(model, owner, cluster)
        return model.answer(withhold_moves(planned, owner, unsubscribed), subscriptions)
