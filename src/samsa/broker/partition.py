"""A served partition: its store plus the long-polling fetches waiting on it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from samsa.broker.storage import PartitionStore


@dataclass(eq=False)
class Partition:
    """One partition of a topic. Its log is the engine's
    :class:`~samsa.broker.storage.PartitionStore`: on a single node a segment log it leads
    at epoch 0; on a cluster node (``--storage``) every node knows every partition, and its
    store accepts appends only while this node holds the partition's lease (ask the
    engine's :class:`~samsa.broker.storage.Leadership`)."""

    topic: str
    index: int
    log: PartitionStore
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def notify(self) -> None:
        """Wake every fetch waiting for data on this partition."""
        waiters, self.waiters = self.waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
