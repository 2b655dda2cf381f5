"""One node of a cluster: its registration, its leases and their hand-overs.

Every tick (``cluster.lease.ttl.ms`` / 4, at most a second, and at once on a ``NOTIFY
samsa_cluster``) the node:

1. renews its registration (``samsa_nodes.expires_at = now() + ttl``, the database's clock).
   A node is live while its registration has not expired and, in addition, while its
   listening connection holds the node's session advisory lock: a node that dies (SIGKILL,
   crash) loses its connections at once, so the others take its leases on their next tick
   instead of after the TTL; a paused node keeps its connections and is found dead only
   when its registration expires;
2. reads the live nodes, every partition's lease (owner, epoch), the topics version and the
   ACLs version (the authorizer reloads the ACLs when it moved);
3. reconciles, each partition's preferred owner being the rendezvous hash over the live
   nodes (:mod:`samsa.cluster.placement`):

   * a lease it holds whose row names another owner or epoch is *lost*: the partition log
     drops its pending writes, a coordinator shard is unloaded;
   * a partition with no owner, or whose owner is not live (its registration expired: it
     stopped renewing for a TTL), is *claimed* by its preferred owner with a compare-and-set
     on the epoch, which bumps it (the new leader epoch); the new leader loads the log's
     offsets and producer state, a coordinator shard is loaded by replaying its records;
   * a lease it holds whose preferred owner is another live node (a node joined) is *handed
     off*: appends are refused, pending ones committed, then the row names the new owner with
     a higher epoch.

A node whose own renewal is older than the TTL (by its local monotonic clock, measured from
before the renewal was sent) treats all its leases as lost before anyone can take them over.
Fencing does not depend on that: every write names the epoch it is written under and the
database refuses it if the row moved on. Clean shutdown hands every lease to its preferred
owner among the other live nodes, then expires the node's registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.broker.topics import OFFSETS_TOPIC
from samsa.cluster.placement import plan
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import LeaseLost, PgPartitionLog
from samsa.storage.pg.schema import LIVE, NODE_LOCK
from samsa.storage.pg.topics import PgTopicManager, fetch_topics

if TYPE_CHECKING:
    from samsa.broker.server import Broker

log = logging.getLogger("samsa.cluster")

CHANNEL = "samsa_cluster"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: int
    host: str
    port: int
    rack: str | None
    #: (listener name, host, port) of each listener the node advertises
    listeners: tuple[tuple[str, str, int], ...] = ()

    def at(self, listener: str) -> NodeInfo | None:
        """This node at ``listener``'s address; None if it has no such listener (a node
        that registered no listeners is taken as it is)."""
        if not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return NodeInfo(self.node_id, host, port, self.rack, self.listeners)
        return None


@dataclass(slots=True)
class ClusterStats:
    """Counters for the metrics."""

    claims: int = 0
    takeovers: int = 0
    """Claims of a lease whose owner had stopped renewing."""
    handoffs: int = 0
    lost: int = 0


_TICK = """
WITH me AS (
    UPDATE samsa_nodes SET expires_at = now() + $3 * interval '1 millisecond'
    WHERE id = $1 AND incarnation = $2 RETURNING id
)
SELECT (SELECT count(*) FROM me) AS renewed,
       (SELECT v FROM samsa_meta WHERE k = 'topics_version') AS topics_version,
       (SELECT v FROM samsa_meta WHERE k = 'acls_version') AS acls_version
"""

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


class ClusterNode:
    """Registration, lease reconciliation and hand-over for one broker."""

    def __init__(self, broker: Broker, engine: PgEngine, topics: PgTopicManager) -> None:
        self.broker = broker
        self.engine = engine
        self.topics = topics
        config = broker.config
        self.node_id = config.node_id
        self.ttl_ms = int(config["cluster.lease.ttl.ms"])
        self.tick_s = max(0.05, min(1.0, self.ttl_ms / 4000))
        self.incarnation = uuid.uuid4()
        self.nodes: dict[int, NodeInfo] = {}
        """Live nodes, by id."""
        self.leases: dict[int, tuple[int | None, int]] = {}
        """Partition id -> (owner, epoch), as last read."""
        self.owned: dict[int, int] = {}
        """Partitions this node leads (loaded), and the epoch it writes with."""
        self.stats = ClusterStats()
        self._busy: set[int] = set()
        self._renewed_at = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._listener: Any = None
        self._stopping = False
        engine.on_lost = self._on_lost

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        await self._register()
        await self.engine.db.run(lambda pool: pool.execute(f"NOTIFY {CHANNEL}"))
        await self.tick()
        self._task = asyncio.create_task(self._loop())
        log.info("node %d joined the cluster (lease ttl %d ms)", self.node_id, self.ttl_ms)

    async def _register(self) -> None:
        """Listen for cluster changes on a connection of its own, which also holds this
        node's advisory lock (while it is held, other nodes see this node live), then
        register (or re-register) with a fresh lease."""
        loop = asyncio.get_running_loop()
        listener, locked = await self.engine.db.run(
            lambda pool: _listen(self.engine.db.dsn, self.node_id,
                                 lambda: loop.call_soon_threadsafe(self._wake.set)))
        self._listener = listener
        if not locked:
            log.warning("node %d: another connection holds this node id's lock; liveness "
                        "falls back to the lease TTL", self.node_id)
        config = self.broker.config
        sent = time.monotonic()
        await self.engine.db.run(lambda pool: pool.execute(
            "INSERT INTO samsa_nodes (id, host, port, rack, incarnation, expires_at, locked, "
            "listeners) "
            "VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond', $7, $8) "
            "ON CONFLICT (id) DO UPDATE SET host = $2, port = $3, rack = $4, "
            "incarnation = $5, started_at = now(), expires_at = EXCLUDED.expires_at, "
            "locked = $7, listeners = $8",
            self.node_id, config.advertised_host, config.advertised_port, config.rack,
            self.incarnation, self.ttl_ms, locked,
            json.dumps({n: list(a) for n, a in self.broker.endpoints.items()})))
        self._renewed_at = sent

    async def stop(self) -> None:
        """Hand every lease over to the other live nodes, then leave."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._jobs:
            await asyncio.gather(*self._jobs, return_exceptions=True)
        others = sorted(n for n in self.nodes if n != self.node_id)
        targets = plan(self._topic_of(), others)
        await asyncio.gather(*(self._hand_off(pid, targets.get(pid)) for pid in list(self.owned)),
                             return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.engine.db.run(lambda pool: pool.execute(
                "UPDATE samsa_nodes SET expires_at = now() WHERE id = $1 AND incarnation = $2",
                self.node_id, self.incarnation))
            await self.engine.db.run(lambda pool: pool.execute(f"NOTIFY {CHANNEL}"))
        if self._listener is not None:
            listener = self._listener
            with contextlib.suppress(Exception):
                await self.engine.db.run(lambda pool: listener.close())
        log.info("node %d left the cluster", self.node_id)

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.tick_s)
            self._wake.clear()
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cluster tick failed")
                self._self_fence()

    # -- the tick -------------------------------------------------------------------------
    async def tick(self) -> None:
        sent = time.monotonic()

        async def read(pool: Any) -> tuple[Any, list[Any], list[Any]]:
            async with pool.acquire() as conn:
                head = await conn.fetchrow(_TICK, self.node_id, self.incarnation, self.ttl_ms)
                nodes = await conn.fetch(f"SELECT id, host, port, rack, listeners::text "
                                         f"FROM samsa_nodes n WHERE {LIVE} ORDER BY id")
                leases = await conn.fetch("SELECT pid, owner, epoch FROM samsa_partitions")
            return head, list(nodes), list(leases)

        if self._listener is not None and self._listener.is_closed():
            log.warning("node %d: lost its listening connection; registering again",
                        self.node_id)
            await self._register()
        head, nodes, leases = await self.engine.db.run(read)
        if head["renewed"]:
            self._renewed_at = sent
        else:
            log.warning("node %d: registration lost (another incarnation?)", self.node_id)
        self._self_fence()
        self.nodes = {r["id"]: NodeInfo(r["id"], r["host"], r["port"], r["rack"],
                                        _listeners(r["listeners"])) for r in nodes}
        if int(head["topics_version"]) != self.topics.version:
            self.topics.apply(await self.engine.db.run(fetch_topics))
        if self.broker.authorizer is not None:  # ACLs changed on another node: reload
            await self.broker.authorizer.sync(int(head["acls_version"]))
        self.leases = {r["pid"]: (r["owner"], r["epoch"]) for r in leases}
        for pid in [p for p in self.owned if p not in self.leases]:  # its topic was deleted
            self.owned.pop(pid)
        if self._stopping or not head["renewed"]:
            return
        self._reconcile()

    def _self_fence(self) -> None:
        if self.owned and time.monotonic() - self._renewed_at > self.ttl_ms / 1000:
            log.warning("node %d: lease not renewed for %d ms; giving up %d partitions",
                        self.node_id, self.ttl_ms, len(self.owned))
            for pid in list(self.owned):
                self._drop(pid)

    def _reconcile(self) -> None:
        me = self.node_id
        preferred = plan(self._topic_of(), sorted(self.nodes))
        claims: list[tuple[int, int]] = []
        for pid, (owner, epoch) in self.leases.items():
            if pid not in self.topics.by_pid or pid in self._busy:
                continue
            held = self.owned.get(pid)
            if held is not None and (owner != me or epoch != held):
                self._drop(pid)
                held = None
            want = preferred.get(pid)
            if held is not None:
                if want is not None and want != me:
                    self._spawn(self._hand_off(pid, want))
            elif want == me and (owner is None or owner == me or owner not in self.nodes):
                claims.append((pid, epoch))
        if claims:
            self._spawn(self._claim(claims))

    def _topic_of(self) -> dict[int, str]:
        by_pid = self.topics.by_pid
        return {pid: by_pid[pid].topic for pid in self.leases if pid in by_pid}

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def _claim(self, claims: list[tuple[int, int]]) -> None:
        pids = [p for p, _ in claims]
        before = {p: self.leases.get(p, (None, 0))[0] for p in pids}
        self._busy.update(pids)
        try:
            rows = await self.engine.db.run(lambda pool: pool.fetch(
                _CLAIM, self.node_id, pids, [e for _, e in claims]))
            if rows:
                await self.engine.db.run(lambda pool: pool.execute(f"NOTIFY {CHANNEL}"))
            await asyncio.gather(*(self._lead(r["pid"], r["epoch"], r["log_start"],
                                              r["log_end"], before[r["pid"]]) for r in rows))
        finally:
            self._busy.difference_update(pids)

    async def _lead(self, pid: int, epoch: int, start: int, end: int,
                    previous: int | None) -> None:
        part = self.topics.by_pid.get(pid)
        if part is None:
            return
        plog = part.log
        assert isinstance(plog, PgPartitionLog)
        self.leases[pid] = (self.node_id, epoch)
        await plog.become_leader(epoch, start, end)
        self.owned[pid] = epoch
        self.stats.claims += 1
        if previous is not None and previous != self.node_id:
            self.stats.takeovers += 1
        log.info("leading %s-%d at epoch %d (offsets %d..%d)", part.topic, part.index,
                 epoch, start, end)
        if part.topic == OFFSETS_TOPIC:
            await self.broker.groups.take_shard(part.index, plog, previous)

    async def _hand_off(self, pid: int, target: int | None) -> None:
        part = self.topics.by_pid.get(pid)
        epoch = self.owned.get(pid)
        if part is None or epoch is None or pid in self._busy:
            return
        plog = part.log
        assert isinstance(plog, PgPartitionLog)
        self._busy.add(pid)
        try:
            if part.topic == OFFSETS_TOPIC:
                self.broker.groups.drop_shard(part.index)
            try:
                await plog.drain()
            except LeaseLost:
                self._drop(pid)
                return
            await self.engine.db.run(lambda pool: pool.fetchval(
                _HAND_OFF, pid, self.node_id, epoch, target))
            self._drop(pid, lost=False)
            self.stats.handoffs += 1
            await self.engine.db.run(lambda pool: pool.execute(f"NOTIFY {CHANNEL}"))
            log.info("handed %s-%d over to node %s", part.topic, part.index, target)
        finally:
            self._busy.discard(pid)

    def _drop(self, pid: int, *, lost: bool = True) -> None:
        """Stop leading ``pid`` (lost, or handed off)."""
        if self.owned.pop(pid, None) is None:
            return
        part = self.topics.by_pid.get(pid)
        if part is None:
            return
        plog = part.log
        assert isinstance(plog, PgPartitionLog)
        plog.lose()
        if part.topic == OFFSETS_TOPIC:
            self.broker.groups.drop_shard(part.index)
        if lost:
            self.stats.lost += 1
            log.warning("lost the lease of %s-%d", part.topic, part.index)

    def _on_lost(self, plog: PgPartitionLog) -> None:
        self._drop(plog.pid)
        self._wake.set()

    # -- queries (handlers) ---------------------------------------------------------------
    async def confirm(self, pid: int) -> bool:
        """Whether this node still holds ``pid``'s lease, as the database says now: for an
        answer a stale holder must not give (a paused node serves what it held until its
        next tick). A lease found gone is dropped at once; False too when the database
        cannot say."""
        epoch = self.owned.get(pid)
        if epoch is None:
            return False
        try:
            row = await self.engine.db.run(lambda pool: pool.fetchrow(
                "SELECT owner, epoch FROM samsa_partitions WHERE pid = $1", pid))
        except Exception:
            log.exception("node %d: could not confirm the lease of partition %d",
                          self.node_id, pid)
            return False
        if row is not None and row["owner"] == self.node_id and row["epoch"] == epoch:
            return True
        if self.owned.get(pid) == epoch:
            self._drop(pid)
            self._wake.set()
        return False

    def leader(self, pid: int) -> tuple[int, int]:
        """(leader node id or -1, leader epoch) of a partition, as last read."""
        epoch = self.owned.get(pid)
        if epoch is not None:
            return self.node_id, epoch
        owner, epoch = self.leases.get(pid, (None, 0))
        if owner is None or owner not in self.nodes or owner == self.node_id:
            return -1, epoch
        return owner, epoch

    def live_nodes(self) -> list[NodeInfo]:
        nodes = dict(self.nodes)
        if self.node_id not in nodes:
            config = self.broker.config
            nodes[self.node_id] = NodeInfo(
                self.node_id, config.advertised_host, config.advertised_port, config.rack,
                tuple((n, h, p) for n, (h, p) in self.broker.endpoints.items()))
        return [nodes[n] for n in sorted(nodes)]


def _listeners(text: str | None) -> tuple[tuple[str, str, int], ...]:
    """The ``listeners`` column: {name: [host, port]} as JSON."""
    data = json.loads(text or "{}")
    return tuple((str(n), str(h), int(p)) for n, (h, p) in sorted(data.items()))


async def _listen(dsn: str, node_id: int, wake: Any) -> tuple[Any, bool]:
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
