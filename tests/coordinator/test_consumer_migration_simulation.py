"""Seeded simulations of mixed groups (classic and consumer-protocol members, online
upgrades and downgrades); see MixedSimulation."""

from __future__ import annotations

import itertools

from .simulation import run_mixed_seed

UPGRADE = ("GroupMetadataKey", "ConsumerGroupMemberMetadataKey")
DOWNGRADE = ("ConsumerGroupMetadataKey", "GroupMetadataKey")


def test_mixed_seeds() -> None:
    upgrades = downgrades = 0
    for seed in range(40):
        sim = run_mixed_seed(seed)
        keys = [type(r.key).__name__ for r in sim.records]
        pairs = list(itertools.pairwise(keys))
        upgrades += pairs.count(UPGRADE)
        downgrades += pairs.count(DOWNGRADE)
    assert upgrades > 5 and downgrades > 5, (upgrades, downgrades)
