"""Keep CPython's full garbage collections short, so they do not stall the event loop.

A broker holds millions of long-lived objects (partitions, logs, groups, target
assignments). A full (generation 2) collection walks all of them: about 250 ms with 18,000
partitions and a 1,000-member consumer group, during which no request is answered. Once a
full collection is over, whatever survived it is moved to the permanent generation
(``gc.freeze()``), so the next full collection walks only what was allocated since.

Frozen objects are never collected by the cycle collector (reference counting still frees
them), so cycles among objects that die after being frozen would be kept. To bound that,
every ``unfreeze_every_s`` the permanent generation is handed back (``gc.unfreeze()``): the
next full collection walks everything once, then freezes the survivors again.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FreezeSurvivors", "install"]

UNFREEZE_EVERY_S = 600.0


class FreezeSurvivors:
    """A ``gc.callbacks`` entry: freezes the survivors of each full collection."""

    def __init__(self, unfreeze_every_s: float = UNFREEZE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.unfreeze_every_s = unfreeze_every_s
        self.clock = clock
        self.last_unfreeze = clock()
        self.full_collections = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        self.full_collections += 1
        now = self.clock()
        if now - self.last_unfreeze >= self.unfreeze_every_s:
            self.last_unfreeze = now
            gc.unfreeze()  # the next full collection walks (and may free) everything
        else:
            gc.freeze()


def install(unfreeze_every_s: float = UNFREEZE_EVERY_S) -> FreezeSurvivors:
    """Register the policy for this process (once; returns the registered callback)."""
    for cb in gc.callbacks:
        if isinstance(cb, FreezeSurvivors):
            return cb
    policy = FreezeSurvivors(unfreeze_every_s)
    gc.callbacks.append(policy)
    return policy
