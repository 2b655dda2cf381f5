"""``cooperative-sticky``: sticky plus incremental rebalancing (KIP-429).

The sticky assignment is computed from the partitions members report as owned (subscription
v1+, with the generation of v2+ or, for v1, the generation this assignor writes as user data).
A partition that would move to a new owner is withheld this round: the current owner sees it
missing from its assignment, revokes it and rejoins; the next rebalance assigns it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

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


def withhold_moves(per_member: list[list[int]], owner: Sequence[int]) -> list[list[int]]:
    """Drop partitions assigned away from their current owner (disputed ones: from everyone)."""
    return [[g for g in gs if owner[g] == m or owner[g] == -1] for m, gs in enumerate(per_member)]


@register_assignor
class CooperativeStickyAssignor(StickyAssignor):
    """Kafka's ``cooperative-sticky`` strategy."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def user_data(self, topics: Sequence[str]) -> bytes | None:
        return struct.pack(">i", self._generation)

    def _owners(self, model: Model, subscriptions: Mapping[str, Subscription]) -> list[int]:
        return model.resolve_owners(
            [claims_from(subscriptions[m], use_user_data=False) for m in model.member_ids]
        )

    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        model = Model(cluster, subscriptions)
        owner = self._owners(model, subscriptions)
        planned = sticky_assign(model, owner, cluster)
        return model.answer(withhold_moves(planned, owner), subscriptions)
