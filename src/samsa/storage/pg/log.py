"""A partition log stored in PostgreSQL, written only by the node holding its lease.

The leader assigns offsets in memory (it is the only writer while its lease holds) and
hands the batches to the engine's :class:`~samsa.storage.pg.engine.Writer`, which commits
the pending batches of all partitions in one transaction per round (group commit): the
batches are copied in, and the last statement moves each written partition's log end only
where this node still owns it at the epoch it wrote with and the stored log end is where
the round starts; the round commits only if every partition passed. A node that lost a
lease (paused past its TTL, then resumed) can never append, and no round commits past one
that failed. Batches become visible to readers (``log_end_offset``, the high watermark)
once committed; acks=all waits for that (:meth:`wait_durable`).

Readers are served from memory: the committed tail (what this leader wrote) and a window
loaded from the database on demand. A read that misses starts a load and returns nothing;
the fetch long-poll is woken (``on_data``) once the load lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from samsa.log import AppendInfo, LogConfig, LogError, OffsetOutOfRange
from samsa.log.append import prepare
from samsa.log.compaction import (
    CleanPolicy,
    KeyMap,
    aborted_ranges,
    add_to_key_map,
    clean_batch,
)
from samsa.log.producer_state import ProducerStateManager
from samsa.log.records import record_at_or_after
from samsa.protocol.batch import BatchHeader, parse_header
from samsa.storage.pg import schema
from samsa.storage.pg.db import Database
from samsa.storage.pg.producer_state import load_producers
from samsa.storage.waiters import Waiters

log = logging.getLogger("samsa.storage.pg")

_BASE = struct.Struct(">q")
TAIL_BYTES = 16 << 20
"""Committed batches kept in memory per partition for readers at the tail."""
LOAD_BYTES = 4 << 20
"""Bytes loaded per read that misses the memory."""
BACKLOG_BYTES = 8 << 20
"""Uncommitted bytes of a partition past which acks=1 answers wait for the commit too
(:meth:`PgPartitionLog.wait_room`): without it the backlog grows without bound while
producers outrun the database, and acks=all requests queue behind it."""


class NotLeader(LogError):
    """This node does not (or no longer) hold the partition's lease."""

    error_code = ErrorCode.not_leader_or_follower


class LeaseLost(OSError):
    """Pending writes were refused: the lease moved (``error_code`` for the answer)."""

    error_code = ErrorCode.not_leader_or_follower


@dataclass(slots=True)
class Batch:
    base_offset: int
    next_offset: int
    max_ts: int
    producer_id: int
    data: bytes


class Host(Protocol):
    """What a partition log needs of its engine (:class:`~samsa.storage.pg.engine.PgEngine`)."""

    db: Database
    node_id: int

    def kick(self, plog: PgPartitionLog) -> None:
        """Commit ``plog``'s pending batches in the next round."""


class PgPartitionLog:
    """The :class:`~samsa.broker.storage.PartitionStore` of one partition in PostgreSQL."""

    def __init__(self, engine: Host, pid: int, topic: str, index: int,
                 config: LogConfig) -> None:
        self.engine = engine
        self.pid = pid
        self.topic = topic
        self.index = index
        self.config = config
        self.producers = ProducerStateManager()
        self.epoch: int | None = None
        """The lease epoch this node writes with; None when it is not the leader."""
        self.accepting = False
        self.on_data: Callable[[], None] = _nothing
        self._start = 0
        self._next = 0
        self._committed = 0
        self._pending: list[Batch] = []
        self._backlog = 0
        """Bytes appended and not yet committed."""
        self._tail: list[Batch] = []
        self._tail_bases: list[int] = []
        self._tail_bytes = 0
        self._window: list[Batch] = []
        self._window_bases: list[int] = []
        self._waiters = Waiters()
        self._loading: asyncio.Task[None] | None = None
        self._busy: asyncio.Task[None] | None = None
        self._clean_end = 0
        """Compaction passed every batch below this offset (since this node leads)."""
        self._closed = False

    def __repr__(self) -> str:
        return f"PgPartitionLog({self.topic}-{self.index}, epoch={self.epoch})"

    # -- leadership -------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.epoch is not None

    async def become_leader(self, epoch: int, log_start: int, log_end: int) -> None:
        """Start leading at ``epoch``: producer state (idempotence, open and aborted
        transactions) is rebuilt from the stored batches
        (:func:`~samsa.storage.pg.producer_state.load_producers`)."""
        self.lose()
        self.producers = await load_producers(self.engine.db, self.pid, log_start)
        self._start, self._next, self._committed = log_start, log_end, log_end
        self._clean_end = 0
        self.epoch = epoch
        self.accepting = True
        self.on_data()

    def lose(self) -> None:
        """Stop leading: pending writes are dropped and their waiters told so."""
        self.epoch = None
        self.accepting = False
        self._pending = []
        self._backlog = 0
        self._clear_cache()
        self.producers = ProducerStateManager()
        self._waiters.fail(LeaseLost(f"{self.topic}-{self.index}: lease lost"))
        self.on_data()

    async def drain(self) -> None:
        """Refuse new appends and wait until every accepted one is committed (hand-off)."""
        self.accepting = False
        await self.wait_appended()

    async def wait_appended(self) -> None:
        """Return once every append accepted so far is committed; LeaseLost if it never
        will be."""
        await self.wait_durable(self._next)

    # -- the store interface ----------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        """The high watermark: the end of what is committed in the database."""
        return self._committed

    @property
    def flushed_offset(self) -> int:
        return self._committed

    @property
    def size_bytes(self) -> int:
        return self._tail_bytes

    def reconfigure(self, config: LogConfig) -> None:
        self.config = config

    @property
    def backlogged(self) -> bool:
        return self._backlog > BACKLOG_BYTES

    def append(self, records: bytes, now_ms: int,
               headers: list[BatchHeader] | None = None) -> AppendInfo:
        """Assign offsets and queue the batches for the next commit (see module doc)."""
        if not self.accepting or self.epoch is None:
            raise NotLeader(f"this node does not lead {self.topic}-{self.index}")
        prepared = prepare(records, headers, self.config, self.producers, self._next,
                           self._start, now_ms)
        if isinstance(prepared, AppendInfo):
            return prepared
        view = memoryview(prepared.buf)
        for h in prepared.headers:
            data = _BASE.pack(h.base_offset) + view[h.position + 8:h.end]
            self._pending.append(Batch(h.base_offset, h.next_offset, h.max_timestamp,
                                       h.producer_id, data))
            self._backlog += len(data)
        info = prepared.done(self.producers, self._start)
        self._next = prepared.next_offset
        self.engine.kick(self)
        return info

    async def wait_durable(self, offset: int) -> None:
        """Return once every offset below ``offset`` is committed; LeaseLost if it never
        will be (the lease moved)."""
        if self._committed >= offset:
            return
        if self.epoch is None:
            raise LeaseLost(f"{self.topic}-{self.index}: not the leader")
        await self._waiters.wait(offset)

    async def wait_room(self, offset: int) -> None:
        """Backpressure for acks=1: while more than :data:`BACKLOG_BYTES` await their
        commit, return once every offset below ``offset`` is committed (or will never be:
        acks=1 answers as before then); at once otherwise."""
        if self.backlogged:
            with contextlib.suppress(LeaseLost):
                await self.wait_durable(offset)

    def flush(self, *, checkpoint: bool = False) -> int:
        return self._committed

    def close(self) -> None:
        self._closed = True
        self.lose()
        for task in (self._loading, self._busy):
            if task is not None:
                task.cancel()

    # -- the writer's side ----------------------------------------------------------------
    def take_pending(self) -> tuple[int, list[Batch]] | None:
        """The batches to commit now and the epoch they are written under."""
        if not self._pending or self.epoch is None:
            return None
        batches, self._pending = self._pending, []
        return self.epoch, batches

    def committed(self, epoch: int, batches: list[Batch]) -> None:
        """The writer committed ``batches`` under ``epoch``."""
        if epoch != self.epoch or not batches:
            return
        self._backlog -= sum(len(b.data) for b in batches)
        end = batches[-1].next_offset
        if end <= self._committed:
            return
        self._committed = end
        for b in batches:
            self._tail.append(b)
            self._tail_bases.append(b.base_offset)
            self._tail_bytes += len(b.data)
        drop = 0
        while self._tail_bytes > TAIL_BYTES and drop < len(self._tail) - 1:
            self._tail_bytes -= len(self._tail[drop].data)
            drop += 1
        if drop:
            del self._tail[:drop]
            del self._tail_bases[:drop]
        self._waiters.reached(end)
        self.on_data()

    # -- reading ------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole committed batches from the one holding ``offset`` (at least one); b"" when
        they are not in memory yet (a load starts and wakes fetches when done)."""
        if self.epoch is None:
            return b""
        if offset < self._start or offset > self._committed:
            raise OffsetOutOfRange(f"offset {offset} not in [{self._start}, {self._committed}]")
        if offset == self._committed:
            return b""
        for bases, batches in ((self._tail_bases, self._tail),
                               (self._window_bases, self._window)):
            data = _take(bases, batches, offset, max_bytes, self._committed)
            if data is not None:
                return data
        self._load(offset)
        return b""

    def _load(self, offset: int) -> None:
        if self._loading is not None and not self._loading.done():
            return
        self._loading = asyncio.get_running_loop().create_task(self._load_from(offset))

    async def _load_from(self, offset: int) -> None:
        epoch, end = self.epoch, self._committed
        try:
            rows = await self.engine.db.run(
                lambda pool: pool.fetch(schema.READ, self.pid, offset, end, LOAD_BYTES))
        except Exception:
            log.exception("reading %s-%d failed", self.topic, self.index)
            return
        if epoch != self.epoch:
            return
        self._window = [Batch(r["base_offset"], r["last_offset"] + 1, 0, -1, r["data"])
                        for r in rows]
        self._window_bases = [b.base_offset for b in self._window]
        self.on_data()

    def _clear_cache(self) -> None:
        self._tail, self._tail_bases, self._tail_bytes = [], [], 0
        self._window, self._window_bases = [], []

    async def read_all(self) -> list[bytes]:
        """Every batch in order once every append accepted so far has committed (loading
        a coordinator shard: an earlier result may still be on its way, and its answers
        promise its records); LeaseLost if it never will."""
        await self.wait_appended()
        return await self._committed_batches()

    async def _committed_batches(self) -> list[bytes]:
        out: list[bytes] = []
        offset, end = self._start, self._committed
        while offset < end:
            rows = await self.engine.db.run(_reader(self.pid, offset, end))
            if not rows:
                break
            out.extend(r["data"] for r in rows)
            offset = rows[-1]["last_offset"] + 1
        return out

    # -- timestamps ---------------------------------------------------------------------
    async def find_timestamp(self, ts_ms: int | None) -> tuple[int, int] | None:
        """Read on the database thread: the event loop serves other requests meanwhile."""
        if ts_ms is None:
            top = await self.engine.db.run(self._max_ts_job())
            if top is None or top < 0:
                return None
            ts_ms = int(top)
        row = await self.engine.db.run(self._at_ts_job(ts_ms))
        return self._found(row, ts_ms)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        return self._found(self.engine.db.run_sync(self._at_ts_job(ts_ms)), ts_ms)

    def _at_ts_job(self, ts_ms: int) -> Callable[[Any], Any]:
        start, end = self._start, self._committed
        return lambda pool: pool.fetchrow(
            "SELECT data FROM samsa_batches WHERE pid = $1 AND max_ts >= $2 "
            "AND last_offset >= $3 AND base_offset < $4 ORDER BY base_offset LIMIT 1",
            self.pid, ts_ms, start, end)

    def _max_ts_job(self) -> Callable[[Any], Any]:
        start, end = self._start, self._committed
        return lambda pool: pool.fetchval(
            "SELECT max(max_ts) FROM samsa_batches WHERE pid = $1 AND last_offset >= $2 "
            "AND base_offset < $3", self.pid, start, end)

    def _found(self, row: Any, ts_ms: int) -> tuple[int, int] | None:
        if row is None:
            return None
        data = bytes(row["data"])
        return record_at_or_after(data, parse_header(data), ts_ms, self._start)

    # -- retention and compaction (background, leader only) -----------------------------
    def apply_retention(self, now_ms: int) -> int:
        """Start moving the log start past batches out of retention; returns 0 (the
        deletion happens in the database, in the background)."""
        if self.epoch is not None and self.config.delete and self._idle():
            self._busy = asyncio.get_running_loop().create_task(self._retain(now_ms))
        return 0

    async def run_compaction(self, now_ms: int) -> None:
        self.plan_compaction(now_ms)

    def plan_compaction(self, now_ms: int) -> None:
        """Start a compaction pass in the background (nothing for the local cleaner) once
        what was appended since the last pass is at least ``min.cleanable.dirty.ratio`` of
        the log."""
        if self.epoch is None or not self.config.compact or not self._idle():
            return
        dirty = self._committed - max(self._clean_end, self._start)
        if dirty <= 0 or dirty < (self._committed - self._start) * \
                self.config.min_cleanable_dirty_ratio:
            return
        self._busy = asyncio.get_running_loop().create_task(self._compact(now_ms))

    def _idle(self) -> bool:
        return self._busy is None or self._busy.done()

    async def _retain(self, now_ms: int) -> None:
        cfg, epoch, end = self.config, self.epoch, self._committed
        if epoch is None:
            return

        async def job(pool: Any) -> int | None:
            start = self._start
            if cfg.retention_ms >= 0:
                keep = await pool.fetchval(
                    "SELECT min(base_offset) FROM samsa_batches WHERE pid = $1 "
                    "AND base_offset < $3 AND max_ts >= $2", self.pid, now_ms - cfg.retention_ms,
                    end)
                start = max(start, end if keep is None else int(keep))
            if cfg.retention_bytes >= 0:
                keep = await pool.fetchval(
                    "SELECT min(base_offset) FROM (SELECT base_offset, sum(size) OVER "
                    "(ORDER BY base_offset DESC) AS suffix FROM samsa_batches WHERE pid = $1 "
                    "AND base_offset < $3) s WHERE suffix <= $2", self.pid, cfg.retention_bytes,
                    end)
                start = max(start, end if keep is None else int(keep))
            if start <= self._start:
                return None
            new = await pool.fetchval(schema.SET_LOG_START, self.pid, self.engine.node_id,
                                      epoch, start)
            return None if new is None else int(new)

        try:
            new_start = await self.engine.db.run(job)
        except Exception:
            log.exception("retention of %s-%d failed", self.topic, self.index)
            return
        if new_start is not None and epoch == self.epoch and new_start > self._start:
            self._start = new_start
            self.producers.remove_before(new_start)
            self._window, self._window_bases = [], []

    async def _compact(self, now_ms: int) -> None:
        """Keep the latest record of each key in every batch but the last (see
        :mod:`samsa.log.compaction`), rewriting batches in place under the lease."""
        epoch = self.epoch
        if epoch is None:
            return
        batches: list[tuple[BatchHeader, bytes]] = []
        try:
            for data in await self._committed_batches():
                blob = bytes(data)
                batches.append((parse_header(blob), blob))
        except Exception:
            log.exception("reading %s-%d for compaction failed", self.topic, self.index)
            return
        if len(batches) < 2 or epoch != self.epoch:
            return
        self._clean_end = batches[-1][0].base_offset
        aborted = aborted_ranges(self.producers.aborted)
        stable = self.producers.last_stable_offset(self._next)
        key_map: KeyMap = {}
        for header, blob in batches:
            if header.base_offset < stable:
                add_to_key_map(key_map, header, blob, aborted)
        policy = CleanPolicy(key_map, now_ms - self.config.delete_retention_ms, aborted)
        horizon = now_ms - self.config.min_compaction_lag_ms
        updates: list[tuple[int, bytes]] = []
        deletes: list[int] = []
        for header, blob in batches[:-1]:
            if header.max_timestamp > horizon or header.next_offset > stable:
                break
            cleaned = clean_batch(header, blob, policy)
            if cleaned is None:
                deletes.append(header.base_offset)
            elif cleaned is not blob:
                updates.append((header.base_offset, cleaned))
        if not updates and not deletes:
            return

        async def job(pool: Any) -> bool:
            async with pool.acquire() as conn, conn.transaction():
                held = await conn.fetchval(
                    "SELECT 1 FROM samsa_partitions WHERE pid = $1 AND owner = $2 "
                    "AND epoch = $3 FOR SHARE", self.pid, self.engine.node_id, epoch)
                if held is None:
                    return False
                await conn.execute("DELETE FROM samsa_batches WHERE pid = $1 AND "
                                   "base_offset = ANY($2::bigint[])", self.pid, deletes)
                await conn.executemany(
                    "UPDATE samsa_batches SET data = $3, size = $4 WHERE pid = $1 "
                    "AND base_offset = $2", [(self.pid, b, d, len(d)) for b, d in updates])
                return True

        try:
            await self.engine.db.run(job)
        except Exception:
            log.exception("compaction of %s-%d failed", self.topic, self.index)
            return
        if epoch == self.epoch:
            self._clear_cache()


def _take(bases: list[int], batches: list[Batch], offset: int, max_bytes: int,
          end: int) -> bytes | None:
    """Batches of ``batches`` from the one holding ``offset`` (or the next one), up to
    ``max_bytes`` but at least one; None when ``offset`` is not covered."""
    if not bases or offset < bases[0]:
        return None
    i = bisect_right(bases, offset) - 1
    while i < len(batches) and batches[i].next_offset <= offset:
        i += 1
    if i >= len(batches) or batches[i].base_offset >= end:
        return None
    first = batches[i].data
    size = len(first)
    parts = [first]
    i += 1
    while i < len(batches) and batches[i].base_offset < end:
        data = batches[i].data
        if size + len(data) > max_bytes:
            break
        parts.append(data)
        size += len(data)
        i += 1
    return first if len(parts) == 1 else b"".join(parts)


def _reader(pid: int, offset: int, end: int) -> Any:
    async def job(pool: Any) -> Any:
        return await pool.fetch(schema.READ, pid, offset, end, LOAD_BYTES)

    return job


def _nothing() -> None:
    pass
