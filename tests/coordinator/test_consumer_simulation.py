"""Seeded simulations of consumer-protocol (KIP-848) groups; see ConsumerSimulation."""

from __future__ import annotations

import pytest

from .simulation import run_consumer_seed

#: Seeds that once failed, with what they caught.
REGRESSION_SEEDS: list[int] = []


@pytest.mark.parametrize("seed", REGRESSION_SEEDS)
def test_regression_seed(seed: int) -> None:
    run_consumer_seed(seed)


def test_many_consumer_seeds() -> None:
    records = replies = 0
    for seed in range(150):
        sim = run_consumer_seed(seed)
        records += len(sim.records)
        replies += len(sim.answered)
    assert records > 5000 and replies > 20_000
