"""Seeded simulations of consumer-protocol (KIP-848) groups; see ConsumerSimulation."""

from __future__ import annotations

from .simulation import run_consumer_seed


def test_one_long_run() -> None:
    sim = run_consumer_seed(7, steps=1500)
    assert len(sim.answered) > 1000


def test_many_consumer_seeds() -> None:
    records = replies = 0
    for seed in range(150):
        sim = run_consumer_seed(seed)
        records += len(sim.records)
        replies += len(sim.answered)
    assert records > 5000 and replies > 20_000
