"""One node of a cluster: its registration, its leases and their hand-overs.

Every tick (``cluster.lease.ttl.ms`` / 4, at most a second, and at once on a ``NOTIFY
samsa_cluster``) the node renews its registration and reads the live nodes, every
partition's lease, the topics version, the ACLs version, the count of admin changes of
share-partition states (``on_share_resets``) and the dynamic configs version
(``on_configs_changed``) in one round trip (the lease
SQL is :class:`samsa.storage.pg.leases.LeaseStore`'s). A node is live while its
registration has not expired and, in addition, while its listening connection holds the
node's session advisory lock: a node that dies (SIGKILL, crash) loses its connections at
once, so the others take its leases on their next tick instead of after the TTL; a paused
node keeps its connections and is found dead only when its registration expires.

What to do about the leases read is decided by the pure step
:func:`samsa.cluster.reconcile.reconcile`; this module carries its actions out:

* a lost lease: the partition log drops its pending writes, a coordinator shard is
  unloaded (``on_shard_lost`` / ``on_txn_shard_lost``), the share partitions of another
  partition go (``on_partition_lost``);
* a claim: a compare-and-set on the epochs read; the new leader loads the log's offsets and
  producer state, a coordinator shard is loaded by replaying its records
  (``on_shard_gained`` for ``__consumer_offsets``, ``on_txn_shard_gained`` for
  ``__transaction_state``), another partition's share partitions load their states
  (``on_partition_gained``) before the node serves it;
* a hand-off: the shard is unloaded or the share partitions go (their pending state saves
  finish), appends are refused, pending ones committed, then the row names the new owner
  with a higher epoch.

Each tick also writes the transaction markers other nodes' coordinators forwarded to the
partitions this node leads (:mod:`samsa.storage.pg.txn_markers`; ``on_marker``) and
answers the implicit adds (KIP-890) other nodes asked of the transaction shards it holds
(``on_txn_add``); :meth:`ClusterNode.forward_markers` and :meth:`ClusterNode.forward_add`
post this node's.

Clean shutdown hands every lease to its preferred owner among the other live nodes, then
expires the node's registration. The node is the engine's
:class:`~samsa.broker.storage.Leadership`: handlers read its last view of the leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.parking import wait_event
from samsa.broker.storage import (
    ClusterStatus,
    CoordinatorLease,
    Node,
    NodeInfo,
    PartitionStore,
    epoch_error,
)
from samsa.broker.topics import OFFSETS_TOPIC, TRANSACTION_TOPIC
from samsa.cluster.placement import plan
from samsa.cluster.reconcile import (
    Action,
    Claim,
    Drop,
    Forget,
    HandOff,
    Holder,
    Lease,
    expired,
    reconcile,
)
from samsa.storage.pg.configs import fetch_configs
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.leases import Claimed, TickRead
from samsa.storage.pg.log import LeaseLost, PgPartitionLog
from samsa.storage.pg.topics import fetch_topics
from samsa.storage.pg.txn_markers import AddMailbox, AddRow, MarkerMailbox, MarkerRow
from samsa.transactions.coordinator import AddPartitions, Markers

log = logging.getLogger("samsa.cluster")

MARKER_WAIT_S = 10.0
"""How long a coordinator waits for forwarded markers before it posts them again."""
ADD_WAIT_S = 5.0
"""How long a node waits for the answer to an implicit add it forwarded."""
_COORDINATOR_TYPES = {OFFSETS_TOPIC: "GROUP", TRANSACTION_TOPIC: "TRANSACTION"}
"""The topics whose partitions are coordinator shards, and the coordinator's type (Kafka's
CoordinatorType names: what FindCoordinator's key_type stands for)."""


class MarkersNotForwarded(Exception):
    """This node no longer coordinates the transaction: its successor writes the markers."""


@dataclass(slots=True)
class ClusterStats:
    """Counters for the metrics."""

    claims: int = 0
    takeovers: int = 0
    """Claims of a lease whose owner had stopped renewing."""
    handoffs: int = 0
    lost: int = 0


class ClusterNode:
    """Registration, lease reconciliation and hand-over for one broker."""

    def __init__(self, engine: PgEngine, config: BrokerConfig) -> None:
        self.engine = engine
        self.store = engine.leases
        self.topics = engine.topics
        self.config = config
        self.node_id = config.node_id
        self.ttl_ms = int(config["cluster.lease.ttl.ms"])
        self.tick_s = max(0.05, min(1.0, self.ttl_ms / 4000))
        self.incarnation = uuid.uuid4()
        self.node: Node | None = None
        self.nodes: dict[int, NodeInfo] = {}
        """Live nodes, by id."""
        self.lease_view: dict[int, Lease] = {}
        """Partition id -> (owner, epoch), as last read."""
        self.owned: dict[int, int] = {}
        """Partitions this node leads (loaded), and the epoch it writes with."""
        self.stats = ClusterStats()
        self._busy: set[int] = set()
        self._renewed_at = 0.0
        self._share_resets = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._listener: Any = None
        self._stopping = False
        engine.on_lost = self._on_lost
        self.mailbox = MarkerMailbox(engine.db, self.node_id)
        self.adds = AddMailbox(engine.db, self.node_id)
        self._adding: set[int] = set()
        self._marking: set[tuple[int, int, int]] = set()
        self._marker_job: asyncio.Task[None] | None = None
        self._markers_read = asyncio.Event()
        """Set after every tick: forwarded markers may have been written meanwhile."""

    @property
    def leases(self) -> bool:
        return True

    def _node(self) -> Node:
        assert self.node is not None, "the cluster node was not opened"
        return self.node

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        await self._register()
        await self.store.notify()
        await self.tick()
        self._task = asyncio.create_task(self._loop())
        log.info("node %d joined the cluster (lease ttl %d ms)", self.node_id, self.ttl_ms)

    async def _register(self) -> None:
        """Listen for cluster changes on a connection of its own, which also holds this
        node's advisory lock (while it is held, other nodes see this node live), then
        register (or re-register) with a fresh lease."""
        self._listener, locked = await self.store.listen(self._wake.set)
        if not locked:
            log.warning("node %d: another connection holds this node id's lock; liveness "
                        "falls back to the lease TTL", self.node_id)
        sent = time.monotonic()
        await self.store.register(self._node().self_info(), self.incarnation, self.ttl_ms,
                                  locked)
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
            await self.store.leave(self.incarnation)
            await self.store.notify()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self.store.unlisten(self._listener)
        log.info("node %d left the cluster", self.node_id)

    async def _loop(self) -> None:
        while True:
            await wait_event(self._wake, self.tick_s)
            self._wake.clear()
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cluster tick failed")
                if expired(self._holder(), time.monotonic()):
                    self._self_fence()

    # -- the tick -------------------------------------------------------------------------
    async def tick(self) -> None:
        node = self._node()
        sent = time.monotonic()
        if self._listener is not None and self._listener.is_closed():
            log.warning("node %d: lost its listening connection; registering again",
                        self.node_id)
            await self._register()
        read = await self.store.tick(self.incarnation, self.ttl_ms)
        if read.renewed:
            self._renewed_at = sent
        else:
            log.warning("node %d: registration lost (another incarnation?)", self.node_id)
        self.nodes = read.nodes
        if read.topics_version != self.topics.version:
            self.topics.offer(await self.engine.db.run(fetch_topics))
            node.on_topics_changed()
        if node.on_acls_changed is not None:  # ACLs changed on another node: reload
            await node.on_acls_changed(read.acls_version)
        await self._configs_tick(read)
        if read.share_resets != self._share_resets:  # admin changes of share states
            if node.on_share_resets is not None:
                await node.on_share_resets()
            self._share_resets = read.share_resets
        self.lease_view = read.leases
        holder, now = self._holder(), time.monotonic()
        if expired(holder, now):
            self._fence_warning()
        self.carry_out(reconcile(holder, self.nodes, read.leases, now, topics=self._topic_of(),
                                 act=read.renewed and not self._stopping))
        self._markers_read.set()
        if self.owned and (self._marker_job is None or self._marker_job.done()):
            self._marker_job = asyncio.create_task(self._mail())
            self._jobs.add(self._marker_job)
            self._marker_job.add_done_callback(self._jobs.discard)

    async def _configs_tick(self, read: TickRead) -> None:
        """Dynamic configs changed (on another node): hand the broker the new ones."""
        configs = self.engine.configs
        if read.configs_version > configs.version:
            configs.offer(await self.engine.db.run(fetch_configs))
            self._node().on_configs_changed()

    def _holder(self) -> Holder:
        return Holder(self.node_id, self.ttl_ms, dict(self.owned), self._renewed_at,
                      frozenset(self._busy))

    def carry_out(self, actions: list[Action]) -> None:
        """Do what :func:`reconcile` decided."""
        for action in actions:
            if isinstance(action, Forget):
                self.owned.pop(action.pid, None)
            elif isinstance(action, Drop):
                self._drop(action.pid)
            elif isinstance(action, HandOff):
                self._spawn(self._hand_off(action.pid, action.target))
            elif isinstance(action, Claim):
                self._spawn(self._claim(list(action.leases)))

    def _fence_warning(self) -> None:
        log.warning("node %d: lease not renewed for %d ms; giving up %d partitions",
                    self.node_id, self.ttl_ms, len(self.owned))

    def _self_fence(self) -> None:
        self._fence_warning()
        for pid in list(self.owned):
            self._drop(pid)

    def _topic_of(self) -> dict[int, str]:
        by_pid = self.topics.by_pid
        return {pid: by_pid[pid].topic for pid in self.lease_view if pid in by_pid}

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def _claim(self, claims: list[tuple[int, int]]) -> None:
        pids = [p for p, _ in claims]
        before = {p: self.lease_view.get(p, (None, 0))[0] for p in pids}
        self._busy.update(pids)
        try:
            taken = await self.store.claim(claims)
            if taken:
                await self.store.notify()
            await asyncio.gather(*(self._lead(c, before[c.pid]) for c in taken))
        finally:
            self._busy.difference_update(pids)

    async def _lead(self, claimed: Claimed, previous: int | None) -> None:
        plog = self.topics.by_pid.get(claimed.pid)
        if plog is None:
            return
        pid, epoch = claimed.pid, claimed.epoch
        self.lease_view[pid] = (self.node_id, epoch)
        await plog.become_leader(epoch, claimed.log_start, claimed.log_end)
        gained = self._node().on_partition_gained
        if gained is not None and plog.topic != OFFSETS_TOPIC:
            await gained(plog.topic, plog.index)  # before it serves: share partitions load
        self.owned[pid] = epoch
        self.stats.claims += 1
        if previous is not None and previous != self.node_id:
            self.stats.takeovers += 1
        log.info("leading %s-%d at epoch %d (offsets %d..%d)", plog.topic, plog.index,
                 epoch, claimed.log_start, claimed.log_end)
        await self._shard_gained(plog, previous, epoch)

    async def _hand_off(self, pid: int, target: int | None) -> None:
        plog = self.topics.by_pid.get(pid)
        epoch = self.owned.get(pid)
        if plog is None or epoch is None or pid in self._busy:
            return
        self._busy.add(pid)
        try:
            self._shard_lost(plog)
            await self._partition_lost(plog)  # share states saved before the hand-off
            try:
                await plog.drain()
            except LeaseLost:
                self._drop(pid)
                return
            await self.store.hand_off(pid, epoch, target)
            self._drop(pid, lost=False)
            self.stats.handoffs += 1
            await self.store.notify()
            log.info("handed %s-%d over to node %s", plog.topic, plog.index, target)
        finally:
            self._busy.discard(pid)

    def _drop(self, pid: int, *, lost: bool = True) -> None:
        """Stop leading ``pid`` (lost, or handed off)."""
        if self.owned.pop(pid, None) is None:
            return
        plog = self.topics.by_pid.get(pid)
        if plog is None:
            return
        plog.lose()
        self._shard_lost(plog)
        if plog.topic != OFFSETS_TOPIC:
            self._spawn(self._partition_lost(plog))  # its share partitions go at once
        if lost:
            self.stats.lost += 1
            log.warning("lost the lease of %s-%d", plog.topic, plog.index)

    def _partition_lost(self, plog: PgPartitionLog) -> Coroutine[Any, Any, None]:
        """Tell the broker at once; the coroutine waits for what it still has to finish."""
        lost = self._node().on_partition_lost
        done = None if lost is None or plog.topic == OFFSETS_TOPIC else lost(plog.topic,
                                                                               plog.index)

        async def finished() -> None:
            if done is not None:
                await done

        return finished()
    async def _shard_gained(self, plog: PgPartitionLog, previous: int | None,
                            epoch: int) -> None:
        """A coordinator shard (group or transaction) came with ``plog``'s lease: load it."""
        node = self._node()
        if plog.topic == OFFSETS_TOPIC:
            await node.on_shard_gained(plog.index, previous, epoch)
        elif plog.topic == TRANSACTION_TOPIC and node.on_txn_shard_gained is not None:
            await node.on_txn_shard_gained(plog.index, previous, epoch)

    def _shard_lost(self, plog: PgPartitionLog) -> None:
        """A coordinator shard (group or transaction) went with ``plog``'s lease."""
        node = self._node()
        if plog.topic == OFFSETS_TOPIC:
            node.on_shard_lost(plog.index)
        elif plog.topic == TRANSACTION_TOPIC:
            node.on_txn_shard_lost(plog.index)

    # -- transaction markers forwarded between nodes (samsa.storage.pg.txn_markers) -------
    async def forward_markers(self, markers: Markers, partitions: Sequence[tuple[str, int]],
                              shard: int) -> None:
        """Have the owners of ``partitions`` write ``markers`` (this node coordinates them
        from ``__transaction_state`` partition ``shard``); returns once every one is
        durable. Raises :class:`MarkersNotForwarded` when this node no longer holds the
        shard, TimeoutError when the owners took too long (the caller retries)."""
        posted = await self.mailbox.forward(
            shard, markers.coordinator_epoch, markers.producer_id, markers.producer_epoch,
            markers.commit, list(partitions))
        if posted is None:
            raise MarkersNotForwarded(f"node {self.node_id} no longer holds transaction "
                                      f"shard {shard}")
        if not posted:
            return
        await self.store.notify()
        deadline = time.monotonic() + MARKER_WAIT_S
        while await self.mailbox.remaining(posted, markers.producer_id,
                                           markers.producer_epoch):
            if time.monotonic() > deadline:
                raise TimeoutError(f"markers of producer {markers.producer_id} not written "
                                   f"in {MARKER_WAIT_S}s")
            self._markers_read.clear()
            await wait_event(self._markers_read, self.tick_s)

    async def _mail(self) -> None:
        """The transaction mailboxes: implicit adds to answer, markers to write."""
        await asyncio.gather(self._answer_adds(), self._write_forwarded())

    async def _write_forwarded(self) -> None:
        """Write the forwarded markers of the partitions this node leads (each once at a
        time), deleting each row once its marker is durable."""
        write = self._node().on_marker
        if write is None:
            return
        rows = [r for r in await self.mailbox.pending() if r.pid in self.owned
                and r.pid in self.topics.by_pid
                and (r.pid, r.producer_id, r.producer_epoch) not in self._marking]
        if rows:
            done = await asyncio.gather(*(self._write_one(write, r) for r in rows))
            if any(done):
                await self.store.notify()

    async def _write_one(self, write: Callable[[str, int, Markers], Awaitable[None]],
                         row: MarkerRow) -> bool:
        plog = self.topics.by_pid[row.pid]
        key = (row.pid, row.producer_id, row.producer_epoch)
        self._marking.add(key)
        try:
            await write(plog.topic, plog.index, Markers(
                "", row.producer_id, row.producer_epoch, row.commit,
                ((plog.topic, plog.index),), row.coordinator_epoch))
            await self.mailbox.done(row)
            return True
        except Exception:
            log.warning("writing a forwarded transaction marker to %s-%d failed",
                        plog.topic, plog.index, exc_info=True)
            return False
        finally:
            self._marking.discard(key)

    async def forward_add(self, event: AddPartitions, shard: int) -> int:
        """Ask the node holding ``__transaction_state`` partition ``shard`` to add
        ``event``'s partitions to its transaction (KIP-890's implicit add); its error code,
        COORDINATOR_NOT_AVAILABLE when no answer came in time."""
        add_id = await self.adds.ask(shard, event.transactional_id, event.producer_id,
                                     event.producer_epoch, list(event.partitions),
                                     event.verify_only)
        try:
            await self.store.notify()
            deadline = time.monotonic() + ADD_WAIT_S
            while (code := await self.adds.answer_of(add_id)) is None:
                if time.monotonic() > deadline:
                    return int(ErrorCode.coordinator_not_available)
                self._markers_read.clear()
                await wait_event(self._markers_read, self.tick_s)
            return code
        finally:
            await self.adds.forget(add_id)

    async def _answer_adds(self) -> None:
        """Answer the implicit adds other nodes asked of the shards this node holds."""
        handle = self._node().on_txn_add
        if handle is None:
            return
        rows = [r for r in await self.adds.questions() if r.id not in self._adding]
        if rows:
            await asyncio.gather(*(self._answer_add(handle, r) for r in rows))
            await self.store.notify()

    async def _answer_add(self, handle: Callable[[AddPartitions], Awaitable[int]],
                          row: AddRow) -> None:
        self._adding.add(row.id)
        try:
            code = await handle(AddPartitions(row.transactional_id, row.producer_id,
                                              row.producer_epoch, row.partitions,
                                              row.verify_only))
            await self.adds.answer(row.id, code)
        except Exception:
            log.warning("answering an implicit add for %s failed", row.transactional_id,
                        exc_info=True)
        finally:
            self._adding.discard(row.id)

    def _on_lost(self, plog: PgPartitionLog) -> None:
        self._drop(plog.pid)
        self._wake.set()

    # -- Leadership (handlers) ------------------------------------------------------------
    def _pid(self, store: PartitionStore) -> int | None:
        return store.pid if isinstance(store, PgPartitionLog) else None

    async def confirm(self, store: PartitionStore) -> bool:
        """Whether this node still holds ``store``'s lease, as the database says now: for an
        answer a stale holder must not give (a paused node serves what it held until its
        next tick). A lease found gone is dropped at once; False too when the database
        cannot say."""
        pid = self._pid(store)
        epoch = None if pid is None else self.owned.get(pid)
        if pid is None or epoch is None:
            return False
        try:
            lease = await self.store.lease(pid)
        except Exception:
            log.exception("node %d: could not confirm the lease of partition %d",
                          self.node_id, pid)
            return False
        if lease == (self.node_id, epoch):
            return True
        if self.owned.get(pid) == epoch:
            self._drop(pid)
            self._wake.set()
        return False

    def leader(self, store: PartitionStore) -> tuple[int, int]:
        """(leader node id or -1, leader epoch) of a partition, as last read."""
        pid = self._pid(store)
        if pid is None:
            return -1, 0
        epoch = self.owned.get(pid)
        if epoch is not None:
            return self.node_id, epoch
        owner, epoch = self.lease_view.get(pid, (None, 0))
        if owner is None or owner not in self.nodes or owner == self.node_id:
            return -1, epoch
        return owner, epoch

    def leader_error(self, store: PartitionStore, current_leader_epoch: int) -> ErrorCode:
        return epoch_error(store.epoch, current_leader_epoch)

    def live_nodes(self) -> list[NodeInfo]:
        nodes = dict(self.nodes)
        if self.node_id not in nodes:
            me = self.node.self_info() if self.node is not None else NodeInfo(
                self.node_id, self.config.advertised_host, self.config.advertised_port,
                self.config.rack)
            nodes[self.node_id] = me
        return [nodes[n] for n in sorted(nodes)]

    def status(self) -> ClusterStatus:
        by_pid = self.topics.by_pid
        held = Counter(by_pid[pid].topic for pid in self.owned if pid in by_pid)
        leases = sorted(
            CoordinatorLease(_COORDINATOR_TYPES[plog.topic], plog.topic, plog.index, owner, epoch)
            for pid, (owner, epoch) in self.lease_view.items()
            if (plog := by_pid.get(pid)) is not None and plog.topic in _COORDINATOR_TYPES)
        shards, txn_shards = held[OFFSETS_TOPIC], held[TRANSACTION_TOPIC]
        stats = self.stats
        return ClusterStatus(tuple(sorted(self.nodes)), tuple(leases),
                             len(self.owned) - shards - txn_shards, shards, txn_shards,
                             stats.claims, stats.takeovers, stats.handoffs, stats.lost)
