"""The lease SQL of a cluster node (the I/O of :mod:`samsa.cluster.node`, whose decisions
are :func:`samsa.cluster.reconcile.reconcile`'s).

* registration: a row in ``samsa_nodes`` renewed every tick (``expires_at = now() + ttl``,
  the database's clock), and a connection of its own that listens on :data:`CHANNEL` and
  holds the node's session advisory lock (a killed node loses it at once: see
  :data:`~samsa.storage.pg.schema.LIVE`);
* a tick reads, in one round trip, whether the renewal took, the topics, ACL and dynamic
  configs versions, the count of share-state admin changes, the live nodes and every
  partition's lease;
* a claim is a compare-and-set on the epochs read (it bumps them: the new leader epochs);
  a hand-off names the new owner with a higher epoch, only while this node holds the lease
  at the epoch it writes with.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.broker.storage import NodeInfo
from samsa.storage.pg.db import Database
from samsa.storage.pg.schema import LIVE, NODE_LOCK

CHANNEL = "samsa_cluster"

_TICK = """
WITH me AS (
    UPDATE samsa_nodes SET expires_at = now() + $3 * interval '1 millisecond'
    WHERE id = $1 AND incarnation = $2 RETURNING id
)
SELECT (SELECT count(*) FROM me) AS renewed,
       (SELECT v FROM samsa_meta WHERE k = 'topics_version') AS topics_version,
       (SELECT v FROM samsa_meta WHERE k = 'acls_version') AS acls_version,
       (SELECT v FROM samsa_meta WHERE k = 'share_resets') AS share_resets,
       (SELECT v FROM samsa_meta WHERE k = 'configs_version') AS configs_version
"""

_NODES = f"""SELECT id, host, port, rack, listeners::text FROM samsa_nodes n WHERE {LIVE}
ORDER BY id"""

_CLAIM = f"""
UPDATE samsa_partitions p SET owner = $1, epoch = p.epoch + 1
FROM unnest($2::bigint[], $3::integer[]) AS v(pid, epoch)
WHERE p.pid = v.pid AND p.epoch = v.epoch
  AND (p.owner IS NULL OR p.owner = $1 OR NOT EXISTS (
       SELECT 1 FROM samsa_nodes n WHERE n.id = p.owner AND {LIVE}))
RETURNING p.pid, p.epoch, p.log_start, p.log_end
"""

_HAND_OFF = """
UPDATE samsa_partitions SET owner = $4, epoch = epoch + 1
WHERE pid = $1 AND owner = $2 AND epoch = $3 RETURNING epoch
"""

_REGISTER = """
INSERT INTO samsa_nodes (id, host, port, rack, incarnation, expires_at, locked, listeners)
VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond', $7, $8)
ON CONFLICT (id) DO UPDATE SET host = $2, port = $3, rack = $4, incarnation = $5,
    started_at = now(), expires_at = EXCLUDED.expires_at, locked = $7, listeners = $8
"""

_STATUS_NODES = f"""
SELECT id, host, port, rack, {LIVE} AS live,
       round(extract(epoch FROM expires_at - now()) * 1000)::bigint AS expires_in_ms
FROM samsa_nodes n ORDER BY id
"""
_STATUS_LEASES = """
SELECT topic, idx, owner, epoch, log_start, log_end FROM samsa_partitions ORDER BY topic, idx
"""

Lease = tuple[int | None, int]
"""(owner node id or None, epoch) of a partition's lease."""


@dataclass(frozen=True, slots=True)
class TickRead:
    """What one tick reads."""

    renewed: bool
    topics_version: int
    acls_version: int
    nodes: dict[int, NodeInfo]
    """The live nodes, by id."""
    leases: dict[int, Lease]
    """Partition id -> lease."""
    share_resets: int = 0
    """Admin changes of share-partition states so far (:mod:`samsa.storage.pg.shares`)."""
    configs_version: int = 0
    """Changes of the dynamic configs so far (:mod:`samsa.storage.pg.configs`)."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """A lease a claim took: its new epoch and the log's offsets."""

    pid: int
    epoch: int
    log_start: int
    log_end: int


class LeaseStore:
    """The lease SQL of one node (``node_id``)."""

    def __init__(self, db: Database, node_id: int) -> None:
        self.db = db
        self.node_id = node_id

    async def listen(self, wake: Callable[[], None]) -> tuple[Any, bool]:
        """A connection of the node's own, listening on :data:`CHANNEL` (``wake`` is called
        on the caller's loop) and holding the node's advisory lock; returns it and whether
        the lock is held."""
        loop = asyncio.get_running_loop()
        dsn, node_id = self.db.dsn, self.node_id

        def on_notify() -> None:
            loop.call_soon_threadsafe(wake)

        return await self.db.run(lambda pool: _listen(dsn, node_id, on_notify))

    async def unlisten(self, conn: Any) -> None:
        await self.db.run(lambda pool: conn.close())

    async def register(self, me: NodeInfo, incarnation: Any, ttl_ms: int,
                       locked: bool) -> None:
        """Register (or re-register) with a fresh lease of ``ttl_ms``."""
        listeners = json.dumps({n: [h, p] for n, h, p in me.listeners})
        await self.db.run(lambda pool: pool.execute(
            _REGISTER, self.node_id, me.host, me.port, me.rack, incarnation, ttl_ms, locked,
            listeners))

    async def tick(self, incarnation: Any, ttl_ms: int) -> TickRead:
        """Renew the registration and read the cluster."""
        async def read(pool: Any) -> tuple[Any, list[Any], list[Any]]:
            async with pool.acquire() as conn:
                head = await conn.fetchrow(_TICK, self.node_id, incarnation, ttl_ms)
                nodes = await conn.fetch(_NODES)
                leases = await conn.fetch("SELECT pid, owner, epoch FROM samsa_partitions")
            return head, list(nodes), list(leases)

        head, nodes, leases = await self.db.run(read)
        return TickRead(
            bool(head["renewed"]), int(head["topics_version"]), int(head["acls_version"]),
            {r["id"]: NodeInfo(r["id"], r["host"], r["port"], r["rack"],
                               _listeners(r["listeners"])) for r in nodes},
            {r["pid"]: (r["owner"], r["epoch"]) for r in leases},
            int(head["share_resets"] or 0), int(head["configs_version"] or 0))

    async def claim(self, claims: list[tuple[int, int]]) -> list[Claimed]:
        """Take the leases ``(pid, epoch read)`` that are free, this node's, or held by a
        node that is not live, if their epochs did not move; the ones taken."""
        rows = await self.db.run(lambda pool: pool.fetch(
            _CLAIM, self.node_id, [p for p, _ in claims], [e for _, e in claims]))
        return [Claimed(r["pid"], r["epoch"], r["log_start"], r["log_end"]) for r in rows]

    async def hand_off(self, pid: int, epoch: int, target: int | None) -> None:
        """Name ``target`` (None: nobody) the owner, if this node holds it at ``epoch``."""
        await self.db.run(lambda pool: pool.fetchval(_HAND_OFF, pid, self.node_id, epoch,
                                                     target))

    async def lease(self, pid: int) -> Lease | None:
        """``pid``'s lease as the database says now."""
        row = await self.db.run(lambda pool: pool.fetchrow(
            "SELECT owner, epoch FROM samsa_partitions WHERE pid = $1", pid))
        return None if row is None else (row["owner"], row["epoch"])

    async def leave(self, incarnation: Any) -> None:
        """Expire this node's registration (a clean shutdown)."""
        await self.db.run(lambda pool: pool.execute(
            "UPDATE samsa_nodes SET expires_at = now() WHERE id = $1 AND incarnation = $2",
            self.node_id, incarnation))

    async def notify(self) -> None:
        """Wake every node's tick."""
        await self.db.run(lambda pool: pool.execute(f"NOTIFY {CHANNEL}"))


def _listeners(text: str | None) -> tuple[tuple[str, str, int], ...]:
    """The ``listeners`` column: {name: [host, port]} as JSON."""
    data = json.loads(text or "{}")
    return tuple((str(n), str(h), int(p)) for n, (h, p) in sorted(data.items()))


async def _listen(dsn: str, node_id: int, wake: Callable[[], None]) -> tuple[Any, bool]:
    """A connection of its own listening on the cluster channel and holding the node's
    advisory lock (tried for a moment: a killed former incarnation's session may still be
    closing); returns it and whether the lock is held."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    await conn.add_listener(CHANNEL, lambda *_: wake())
    for _ in range(20):
        if await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", NODE_LOCK, node_id):
            return conn, True
        await asyncio.sleep(0.1)
    return conn, False


async def status(dsn: str) -> dict[str, Any]:
    """Nodes and leases as ``samsa cluster status`` shows them (its own connection)."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        nodes = [dict(r) for r in await conn.fetch(_STATUS_NODES)]
        leases = [dict(r) for r in await conn.fetch(_STATUS_LEASES)]
    finally:
        await conn.close()
    live = {n["id"] for n in nodes if n["live"]}
    for lease in leases:
        lease["owner_live"] = lease["owner"] in live
    counts = {n["id"]: sum(1 for x in leases if x["owner"] == n["id"]) for n in nodes}
    for n in nodes:
        n["leases"] = counts[n["id"]]
    return {"nodes": nodes, "leases": leases}
