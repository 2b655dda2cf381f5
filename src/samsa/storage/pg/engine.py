"""The PostgreSQL stores of one node: its database, its node id, the group-commit writer,
and the stores the broker's port asks for (topics, producer ids, ACLs, SCRAM credentials).
Which node leads what is the cluster's control loop (:mod:`samsa.cluster`), over the lease
SQL of :mod:`samsa.storage.pg.leases`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from samsa.storage.pg import schema
from samsa.storage.pg.acls import PgAclStore
from samsa.storage.pg.credentials import PgCredentialStore
from samsa.storage.pg.db import Database
from samsa.storage.pg.leases import LeaseStore
from samsa.storage.pg.log import Batch, PgPartitionLog
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
        self.leases = LeaseStore(self.db, node_id)

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


class Writer:
    """Commits the pending batches of every partition, one statement per round.

    One round is in flight at a time, so a partition's batches commit in offset order;
    appends that arrive meanwhile form the next round (group commit).
    """

    def __init__(self, engine: PgEngine) -> None:
        self.engine = engine
        self._dirty: dict[PgPartitionLog, None] = {}
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def kick(self, plog: PgPartitionLog) -> None:
        self._dirty[plog] = None
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._dirty:
            logs = list(self._dirty)
            self._dirty.clear()
            taken: list[tuple[PgPartitionLog, int, list[Batch]]] = []
            for plog in logs:
                got = plog.take_pending()
                if got is not None:
                    taken.append((plog, *got))
            if not taken:
                continue
            try:
                ok = await self.engine.db.run(_append_job(self.engine.node_id, taken))
            except Exception:
                log.exception("committing %d partitions failed", len(taken))
                ok = set()
            self.rounds += 1
            for plog, epoch, batches in taken:
                if plog.pid in ok:
                    plog.committed(epoch, batches)
                elif epoch == plog.epoch:
                    log.warning("write to %s-%d refused: lease epoch %d is stale",
                                plog.topic, plog.index, epoch)
                    self.engine.lost(plog)


def _append_job(node_id: int, taken: list[tuple[PgPartitionLog, int, list[Batch]]]) -> Any:
    pids, epochs, ends = [], [], []
    b_pid, b_base, b_last, b_ts, b_producer, b_size, b_data = [], [], [], [], [], [], []
    for plog, epoch, batches in taken:
        pids.append(plog.pid)
        epochs.append(epoch)
        ends.append(batches[-1].next_offset)
        for b in batches:
            b_pid.append(plog.pid)
            b_base.append(b.base_offset)
            b_last.append(b.next_offset - 1)
            b_ts.append(b.max_ts)
            b_producer.append(b.producer_id)
            b_size.append(len(b.data))
            b_data.append(b.data)

    async def job(pool: Any) -> set[int]:
        rows = await pool.fetch(schema.APPEND, node_id, pids, epochs, ends, b_pid, b_base,
                                b_last, b_ts, b_producer, b_size, b_data)
        return {int(r["pid"]) for r in rows}

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
