"""Share groups (KIP-932): the share partitions' in-flight windows, sans-I/O.

* :mod:`.partition`: one share partition (SPSO/SPEO window, record states, acquisition locks
  on keyed timers, delivery counts, acknowledgements, durable state and its updates);
* :mod:`.reset`: ``share.auto.offset.reset``.
"""

from samsa.share.partition import (
    AckType,
    Acquired,
    DurableState,
    LockKey,
    LockTimer,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareUpdate,
    StateBatch,
)
from samsa.share.reset import OffsetReset

__all__ = [
    "AckType",
    "Acquired",
    "DurableState",
    "LockKey",
    "LockTimer",
    "OffsetReset",
    "RecordState",
    "SharePartition",
    "SharePartitionConfig",
    "ShareUpdate",
    "StateBatch",
]
