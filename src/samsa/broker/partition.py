"""A served partition: its log plus the long-polling fetches waiting on it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from samsa.log import PartitionLog


@dataclass(eq=False)
class Partition:
    """One partition of a topic: on a single node its leader at epoch 0; on a cluster node
    (``--storage``) every node knows every partition, and its log accepts appends only
    while this node holds the partition's lease (:mod:`samsa.cluster`)."""

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
