"""A partition of the local engine: a segment log (:class:`samsa.log.PartitionLog`) as the
broker's :class:`~samsa.broker.storage.PartitionStore`.

Durability is group commit (:class:`~samsa.storage.local.flusher.Flusher`, shared by the
engine's partitions); compaction plans and installs on the event loop and rewrites segments
on a worker thread meanwhile, so requests keep being served.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.log import LogConfig, PartitionLog
from samsa.protocol.batch import BATCH_OVERHEAD, parse_header
from samsa.storage.local.flusher import Flusher


class LocalPartition(PartitionLog):
    """A segment log led by this node alone, at epoch 0."""

    epoch = 0
    backlogged = False
    flusher: Flusher

    @classmethod
    def open_with(cls, directory: Path, config: LogConfig, flusher: Flusher, *,
                  now_ms: int) -> LocalPartition:
        log = cls.open(directory, config, now_ms=now_ms)
        assert isinstance(log, LocalPartition)
        log.flusher = flusher
        return log

    async def wait_durable(self, offset: int) -> None:
        await self.flusher.sync(self, offset)

    async def wait_room(self, offset: int) -> None:
        """Never backlogged: appends reach the OS before they return."""

    async def read_all(self) -> list[bytes]:
        """Every batch from the log start (appends are readable once they return)."""
        out: list[bytes] = []
        offset = self.log_start_offset
        while offset < self.log_end_offset:
            data = bytes(self.read(offset, 1 << 20))
            if not data:
                break
            out.append(data)
            after = _after(data)
            if after <= offset:
                break
            offset = after
        return out

    async def find_timestamp(self, ts_ms: int | None) -> tuple[int, int] | None:
        """Answered at once, from the segments' time indexes."""
        return self.max_timestamp_offset() if ts_ms is None else self.offset_for_timestamp(ts_ms)

    async def run_compaction(self, now_ms: int) -> None:
        """Choose segments and swap the cleaned files in here, on the loop; rewriting them
        (seconds for a large segment) runs on a worker thread meanwhile."""
        plan = self.plan_compaction(now_ms)
        if plan is None:
            return
        try:
            sizes = await asyncio.get_running_loop().run_in_executor(None, self.clean, plan)
        except asyncio.CancelledError:
            raise  # shutting down: closing the log stops the cleaner
        except Exception:
            self.install_cleaned(plan, None)
            raise
        self.install_cleaned(plan, sizes)


def _after(data: bytes) -> int:
    """The offset after the last whole batch of ``data``."""
    pos, end = 0, -1
    while pos + BATCH_OVERHEAD <= len(data):
        header = parse_header(data, pos)
        end = header.next_offset
        pos = header.end
    return end
