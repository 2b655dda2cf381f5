"""A served partition: its log plus the long-polling fetches waiting on it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from samsa.log import PartitionLog


@dataclass(eq=False)
class Partition:
    """One partition of a topic on this node (always its leader, epoch 0)."""

    topic: str
    index: int
    log: PartitionLog
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def notify(self) -> None:
        """Wake every fetch waiting for data on this partition."""
        waiters, self.waiters = self.waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
