"""samsa.broker.gc_policy: the survivors of each full collection are frozen, and handed
back to the collector every ``unfreeze_every_s``."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from samsa.broker.gc_policy import FreezeSurvivors, install


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_full_collections_freeze_their_survivors_and_unfreeze_periodically() -> None:
    now = [0.0]
    policy = FreezeSurvivors(unfreeze_every_s=60, clock=lambda: now[0])
    keep = [[i] for i in range(1000)]  # some tracked, live objects
    policy("start", {"generation": 2})
    policy("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    assert gc.get_freeze_count() == 0  # young collections change nothing
    policy("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
    assert gc.get_freeze_count() >= len(keep) and policy.full_collections == 1
    now[0] = 61
    policy("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
    assert gc.get_freeze_count() == 0  # handed back: the next full collection sees all
    policy("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
    assert gc.get_freeze_count() >= len(keep)


def test_install_registers_once() -> None:
    before = list(gc.callbacks)
    try:
        first = install()
        assert install() is first
        assert sum(isinstance(cb, FreezeSurvivors) for cb in gc.callbacks) == 1
        gc.collect()  # a real full collection runs the policy
        assert first.full_collections >= 1
    finally:
        gc.callbacks[:] = before
