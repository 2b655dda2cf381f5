"""samsa.storage: where partition logs live, behind one narrow interface.

Two engines implement :class:`PartitionStore`:

* local segment files (:class:`samsa.log.PartitionLog`, the embedded single node; it is the
  interface as it stands, so the default path costs nothing extra);
* PostgreSQL (:mod:`samsa.storage.pg`): record batches as they arrived on the wire, one row
  each with base and last offsets, shared by every node of a cluster; each partition is
  written only by the node holding its lease, and every write is fenced by the lease epoch.

An object-storage engine would implement the same surface: append whole batches at the log
end, read whole batches from an offset, report the log start/end and durable offsets, look
offsets up by timestamp, and apply retention and compaction.
"""

from __future__ import annotations

from typing import Protocol

from samsa.log import AppendInfo, LogConfig
from samsa.protocol.batch import BatchHeader

__all__ = ["PartitionStore"]


class PartitionStore(Protocol):
    """What the broker asks of one partition's log (every method on the event loop)."""

    config: LogConfig

    @property
    def closed(self) -> bool: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The offset after the last record readers may see."""

    @property
    def flushed_offset(self) -> int:
        """Every offset below this one is durable."""

    def append(self, records: bytes, now_ms: int,
               headers: list[BatchHeader] | None = None) -> AppendInfo: ...

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview: ...

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None: ...

    def max_timestamp_offset(self) -> tuple[int, int] | None: ...

    def reconfigure(self, config: LogConfig) -> None: ...

    def apply_retention(self, now_ms: int) -> int: ...

    def flush(self, *, checkpoint: bool = False) -> int: ...

    def close(self) -> None: ...
