"""Seeded simulations of whole groups; a failing seed is printed and kept as a regression."""

from __future__ import annotations

import time

import pytest

from .simulation import run_seed

#: Seeds that once failed, with what they caught (run with the default step count).
REGRESSION_SEEDS: list[int] = [
    120,  # a group expired (Dead + tombstone) and was re-created at generation 0 in one step
]


@pytest.mark.parametrize("seed", REGRESSION_SEEDS)
def test_regression_seed(seed: int) -> None:
    run_seed(seed)


def test_many_seeds() -> None:
    start = time.monotonic()
    stats = {"records": 0, "replies": 0}
    for seed in range(300):
        sim = run_seed(seed)
        stats["records"] += len(sim.records)
        stats["replies"] += len(sim.answered)
    assert stats["records"] > 1000 and stats["replies"] > 10_000
    assert time.monotonic() - start < 60
