"""The PostgreSQL stores of one node: its database, its node id, the group-commit writer,
and the stores the broker's port asks for (topics, producer ids, ACLs, SCRAM credentials,
dynamic configs, share-partition states).
Which node leads what is the cluster's control loop (:mod:`samsa.cluster`), over the lease
SQL of :mod:`samsa.storage.pg.leases`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from samsa.storage.pg import schema
from samsa.storage.pg.acls import PgAclStore
from samsa.storage.pg.configs import PgConfigStore
from samsa.storage.pg.credentials import PgCredentialStore
from samsa.storage.pg.db import Database
from samsa.storage.pg.leases import LeaseStore
from samsa.storage.pg.log import Batch, PgPartitionLog
from samsa.storage.pg.shares import PgShareStates
from samsa.storage.pg.topics import PgTopicStore

log = logging.getLogger("samsa.storage.pg")


class PgEngine:
    """Shared by the partition logs of one node."""

    def __init__(self, dsn: str, node_id: int) -> None:
        self.db = Database(dsn)
        self.node_id = node_id
        self.writer = Writer(self)
        self.on_lost: Callable[[PgPartitionLog], None] = lambda _log: None
        """Called when a write found the lease gone (the cluster forgets the partition)."""
        self.topics = PgTopicStore(self)
        self.producer_ids = PgProducerIds(self)
        self.acls = PgAclStore(self.db)
        self.credentials = PgCredentialStore(self.db)
        self.configs = PgConfigStore(self.db)
        self.leases = LeaseStore(self.db, node_id)
        self.share_states = PgShareStates(self.db, node_id)

    def open(self) -> None:
        self.db.open()
        self.db.run_sync(schema.create_schema)

    def kick(self, plog: PgPartitionLog) -> None:
        self.writer.kick(plog)

    def lost(self, plog: PgPartitionLog) -> None:
        plog.lose()
        self.on_lost(plog)

    def close(self) -> None:
        self.db.close()

    def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids for this node; returns the first."""
        first = self.db.run_sync(lambda pool: pool.fetchval(
            "UPDATE samsa_meta SET v = v + $1 WHERE k = 'producer_id' RETURNING v - $1",
            count))
        return int(first)


ROUNDS_IN_FLIGHT = 2
"""Rounds a node's writer runs at once: the next round copies its batches in while the one
before commits (the commit's WAL flush is most of a round's time)."""


class Writer:
    """Commits the pending batches of every partition in rounds (group commit): a round
    takes what every partition has pending and commits it in one transaction.

    Up to :data:`ROUNDS_IN_FLIGHT` rounds run at once, each on a connection of its own: the
    batches of a round are copied in (``COPY``) while the round before it commits, and its
    fence (:data:`~samsa.storage.pg.schema.COMMIT_END`) runs only once that round has
    finished, so a partition's rounds commit in offset order and a round whose predecessor
    failed never commits past the gap. Results are handled in the order the rounds began.
    """

    def __init__(self, engine: PgEngine) -> None:
        self.engine = engine
        self._dirty: dict[PgPartitionLog, None] = {}
        self._running = 0
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._last: tuple[asyncio.Future[None], concurrent.futures.Future[set[int]]] | None = \
            None
        """The newest round: handled on this loop / finished on the database thread."""
        self.rounds = 0

    def kick(self, plog: PgPartitionLog) -> None:
        """Commit ``plog``'s pending batches in a round that starts once the loop has run
        what is ready (the appends made meanwhile join it)."""
        self._dirty[plog] = None
        if not self._scheduled and self._running < ROUNDS_IN_FLIGHT:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._scheduled = False
        loop = asyncio.get_running_loop()
        while self._dirty and self._running < ROUNDS_IN_FLIGHT:
            logs = list(self._dirty)
            self._dirty.clear()
            taken: list[tuple[PgPartitionLog, int, list[Batch]]] = []
            for plog in logs:
                got = plog.take_pending()
                if got is not None:
                    taken.append((plog, *got))
            if not taken:
                continue
            before = self._last
            job = self.engine.db.submit(_append_job(
                self.engine.node_id, taken, None if before is None else before[1]))
            handled: asyncio.Future[None] = loop.create_future()
            self._last = (handled, job)
            self._running += 1
            task = loop.create_task(self._finish(
                taken, job, None if before is None else before[0], handled))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _finish(self, taken: list[tuple[PgPartitionLog, int, list[Batch]]],
                      job: concurrent.futures.Future[set[int]],
                      before: asyncio.Future[None] | None,
                      handled: asyncio.Future[None]) -> None:
        try:
            try:
                ok = await asyncio.wrap_future(job)
            except Exception:
                log.exception("committing %d partitions failed", len(taken))
                ok = set()
            if before is not None:
                await before
            self.rounds += 1
            for plog, epoch, batches in taken:
                if plog.pid in ok:
                    plog.committed(epoch, batches)
                elif epoch == plog.epoch:
                    log.warning("write to %s-%d refused: lease epoch %d is stale or a "
                                "write before it failed", plog.topic, plog.index, epoch)
                    self.engine.lost(plog)
        finally:
            handled.set_result(None)
            self._running -= 1
            if self._dirty:
                self._start()


class _Refused(Exception):
    """Rolls a round back: some of its partitions failed the fence."""

    def __init__(self, passed: set[int]) -> None:
        super().__init__(passed)
        self.passed = passed


def _append_job(node_id: int, taken: list[tuple[PgPartitionLog, int, list[Batch]]],
                after: concurrent.futures.Future[set[int]] | None) -> Any:
    """The round's transaction: copy the batches in, wait for the round before to finish,
    fence and commit (BEGIN, COPY, the fence, COMMIT). A partition that fails the fence
    (its lease moved, or its round before failed) is dropped and the others are committed
    again without it, after a check of the leases (a lease that moved can also show as a
    new leader's batch at the same offset); returns the partitions committed."""
    rounds = {plog.pid: (epoch, batches) for plog, epoch, batches in taken}

    async def attempt(pool: Any, pids: list[int], check: bool) -> set[int]:
        async with pool.acquire() as conn, conn.transaction():
            if check:  # a retry: copy only what this node still owns
                owned = {int(r["pid"]) for r in await conn.fetch(
                    schema.OWNED, node_id, pids, [rounds[pid][0] for pid in pids])}
                pids = [pid for pid in pids if pid in owned]
                if not pids:
                    return set()
            await conn.copy_records_to_table(
                "samsa_batches", columns=schema.BATCH_COLUMNS,
                records=[(pid, b.base_offset, b.next_offset - 1, b.max_ts, b.producer_id,
                          len(b.data), b.data) for pid in pids for b in rounds[pid][1]])
            if after is not None:
                with contextlib.suppress(Exception):  # its own finish reports it
                    await asyncio.wrap_future(after)
            passed = {int(r["pid"]) for r in await conn.fetch(
                schema.COMMIT_END, node_id, pids, [rounds[pid][0] for pid in pids],
                [rounds[pid][1][0].base_offset for pid in pids],
                [rounds[pid][1][-1].next_offset for pid in pids])}
            if len(passed) < len(pids):
                raise _Refused(passed)
            return passed

    async def job(pool: Any) -> set[int]:
        pids, conflicts, check = sorted(rounds), 0, False
        while pids:
            try:
                return await attempt(pool, pids, check)
            except _Refused as refused:
                pids = sorted(refused.passed)
            except asyncpg.UniqueViolationError:
                # A new leader wrote these offsets: its claim, committed before, makes the
                # lease check drop the partition next time.
                conflicts += 1
                if conflicts > 2:
                    raise
            check = True
        return set()

    return job


class PgProducerIds:
    """Producer ids unique across the cluster: blocks reserved in the database."""

    BLOCK = 1000

    def __init__(self, engine: PgEngine) -> None:
        self.engine = engine
        self._next = self._limit = 0

    def allocate(self) -> int:
        if self._next >= self._limit:
            self._next = self.engine.allocate_producer_ids(self.BLOCK)
            self._limit = self._next + self.BLOCK
        pid = self._next
        self._next += 1
        return pid
