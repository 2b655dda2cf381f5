"""Topics kept in PostgreSQL, shared by every node of the cluster (the engine's
:class:`~samsa.broker.storage.TopicStore`).

Every change (create, grow, alter, delete) is one transaction bumping ``topics_version``
and notifying the other nodes, written on the database thread while the event loop goes on
(auto-created and internal topics too; :meth:`PgTopicStore.create_now`, blocking, is the
port's for a caller that cannot await, which a cluster node has none of); the broker's
catalog validated it first and re-reads the snapshot after. A node's snapshot is read again
when the version moved: on its lease tick (read there without blocking and handed over
with :meth:`PgTopicStore.offer`), or awaited after a change of its own or when a request
names a topic the node's view lacks (:meth:`PgTopicStore.fetch`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from samsa.broker.storage import TopicRecord
from samsa.log import LogConfig
from samsa.storage.pg.log import Host, PgPartitionLog

log = logging.getLogger("samsa.storage.pg")

_BUMP = "UPDATE samsa_meta SET v = v + 1 WHERE k = 'topics_version'"

Snapshot = tuple[int, list[Any], list[Any]]
"""(topics_version, topic rows, partition rows), from :func:`fetch_topics`."""


class PgTopicStore:
    """The topic tables, and this node's partition logs by partition id."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.version = -1
        """The topics_version of the last snapshot taken."""
        self.by_pid: dict[int, PgPartitionLog] = {}
        self._pids: dict[tuple[str, int], int] = {}
        self._offered: Snapshot | None = None

    # -- reading ----------------------------------------------------------------------------
    def load(self, now_ms: int) -> None:
        pass

    def offer(self, snapshot: Snapshot) -> None:
        """A snapshot read elsewhere (the lease tick): the next :meth:`snapshot` is it."""
        self._offered = snapshot

    def snapshot(self) -> list[TopicRecord] | None:
        offered, self._offered = self._offered, None
        return self._take(offered if offered is not None else self.host.db.run_sync(fetch_topics))

    async def fetch(self) -> list[TopicRecord] | None:
        offered, self._offered = self._offered, None
        # on the database thread; a snapshot taken meanwhile as new makes this one None
        return self._take(offered if offered is not None else await self.host.db.run(fetch_topics))

    def _take(self, snapshot: Snapshot) -> list[TopicRecord] | None:
        version, topic_rows, part_rows = snapshot
        if version <= self.version:  # nothing new (or read before the last one taken)
            return None
        self.version = version
        counts: dict[str, int] = {}
        pids: dict[tuple[str, int], int] = {}
        for r in part_rows:
            pids[(r["topic"], r["idx"])] = r["pid"]
            counts[r["topic"]] = counts.get(r["topic"], 0) + 1
        self._pids = pids
        live = set(pids.values())
        for pid in [p for p in self.by_pid if p not in live]:
            del self.by_pid[pid]  # its topic is gone: the catalog closes its log
        out = []
        for r in topic_rows:
            overrides = json.loads(r["configs"]) if isinstance(r["configs"], str) else r["configs"]
            out.append(TopicRecord(r["name"], r["id"], dict(overrides), counts.get(r["name"], 0)))
        return out

    def open_partition(self, topic: str, index: int, config: LogConfig, now_ms: int,
                       wake: Callable[[], None]) -> PgPartitionLog:
        pid = self._pids[(topic, index)]
        plog = PgPartitionLog(self.host, pid, topic, index, config)
        plog.on_data = wake
        self.by_pid[pid] = plog
        return plog

    # -- changes ------------------------------------------------------------------------------
    async def create(self, record: TopicRecord) -> bool:
        return bool(await self.host.db.run(_create_job(record)))

    def create_now(self, record: TopicRecord) -> bool:
        return bool(self.host.db.run_sync(_create_job(record)))

    async def add_partitions(self, name: str, current: int, total: int) -> None:
        async def job(pool: Any) -> None:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    "INSERT INTO samsa_partitions (topic, idx) SELECT $1, g "
                    "FROM generate_series($2, $3 - 1) g ON CONFLICT DO NOTHING",
                    name, current, total)
                await _bump(conn)

        await self.host.db.run(job)

    async def alter(self, name: str, overrides: Mapping[str, str]) -> None:
        configs = json.dumps(dict(overrides))

        async def job(pool: Any) -> None:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("UPDATE samsa_topics SET configs = $2::jsonb WHERE name = $1",
                                   name, configs)
                await _bump(conn)

        await self.host.db.run(job)

    async def delete(self, name: str, topic_id: uuid.UUID) -> bool:
        async def job(pool: Any) -> bool:
            async with pool.acquire() as conn, conn.transaction():
                # the topic's row first: a deletion racing this one (another node's) waits
                # for it, then finds nothing to delete (its partitions go with the row)
                gone = await conn.fetch(
                    "WITH gone AS (DELETE FROM samsa_topics WHERE name = $1 AND id = $2 "
                    "RETURNING name) SELECT p.pid FROM gone "
                    "LEFT JOIN samsa_partitions p ON p.topic = gone.name", name, topic_id)
                if not gone:
                    return False
                await conn.execute("DELETE FROM samsa_batches WHERE pid = ANY($1::bigint[])",
                                   [r["pid"] for r in gone if r["pid"] is not None])
                await _bump(conn)
                return True

        return bool(await self.host.db.run(job))


def _create_job(record: TopicRecord) -> Callable[[Any], Awaitable[bool]]:
    name, overrides = record.name, json.dumps(dict(record.overrides))

    async def job(pool: Any) -> bool:
        async with pool.acquire() as conn, conn.transaction():
            done = await conn.fetchval(
                "INSERT INTO samsa_topics (name, id, configs) VALUES ($1, $2, $3::jsonb) "
                "ON CONFLICT DO NOTHING RETURNING true", name, record.topic_id, overrides)
            if not done:
                return False
            await conn.execute(
                "INSERT INTO samsa_partitions (topic, idx) SELECT $1, g "
                "FROM generate_series(0, $2 - 1) g", name, record.partitions)
            await _bump(conn)
            return True

    return job


async def _bump(conn: Any) -> None:
    """A change is made: move ``topics_version`` and tell the other nodes."""
    await conn.execute(_BUMP)
    await conn.execute("NOTIFY samsa_cluster")


async def fetch_topics(pool: Any) -> Snapshot:
    """(topics_version, topic rows, partition rows) in one snapshot."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read",
                                                        readonly=True):
        version = await conn.fetchval("SELECT v FROM samsa_meta WHERE k = 'topics_version'")
        topics = await conn.fetch("SELECT name, id, configs FROM samsa_topics ORDER BY name")
        parts = await conn.fetch("SELECT pid, topic, idx FROM samsa_partitions ORDER BY pid")
    return int(version), list(topics), list(parts)
