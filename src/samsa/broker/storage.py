"""The broker's storage port: what a storage engine provides. The broker names no engine.

``samsa serve`` builds an :class:`Engine` (:mod:`samsa.cli.serve`) and hands it to
:class:`~samsa.broker.server.Broker`; the broker, its handlers and the group runtime type
against these protocols only:

* :class:`PartitionStore`: one partition's log: append whole batches at the log end (its
  producer state tracks idempotent producers and open and aborted transactions), read
  whole batches from an offset, wait until an offset is durable, read everything (loading a
  coordinator shard), look offsets up by timestamp (awaitable), apply retention and compaction;
* :class:`TopicStore`: where the topic catalog (:class:`~samsa.broker.topics.TopicManager`,
  which validates and keeps the in-memory view) is persisted, and the partition stores it
  opens;
* :class:`ProducerIds`: producer ids unique across restarts (and nodes);
* :class:`Leadership`: who leads each partition and coordinates each shard, the live nodes,
  and whether this node still holds a lease;
* the ACL store (:class:`~samsa.security.authorizer.AclStore`) and the SCRAM credentials
  (:class:`~samsa.security.credentials.CredentialStore`);
* :class:`ConfigStore`: the dynamic configs of ``BROKER`` and ``GROUP`` resources
  (:class:`~samsa.broker.dynamic_config.DynamicConfigs` validates and resolves them): a
  node's file on a single node, shared by every node of a cluster;
* :class:`ShareStates`: share-partition states kept beside the partitions' leases (a
  cluster); an engine without it leaves them to the broker's ``__share_group_state`` topic;
* :class:`Engine`: all of the above and a life cycle; the broker hands it the
  :class:`Node` callbacks through which an engine with leases moves coordinator shards
  (``on_shard_gained`` / ``on_shard_lost``, and ``on_txn_shard_*`` for the transaction
  coordinator's) and partitions (``on_partition_gained`` / ``on_partition_lost``: the share
  partitions follow them), and hands this node the transaction markers other nodes forward
  (``on_marker``).

Engines: local segment files (:mod:`samsa.storage.local`, one node), PostgreSQL shared by
the nodes of a cluster (:mod:`samsa.storage.pg`, run by the control loop of
:mod:`samsa.cluster`), and an in-memory engine that injects faults (``tests/storage``).
Every engine passes the contract test in ``tests/storage``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.log import AppendInfo, LogConfig
from samsa.log.producer_state import ProducerStateManager
from samsa.protocol.batch import BatchHeader
from samsa.security.authorizer import AclStore
from samsa.security.credentials import CredentialStore
from samsa.transactions.coordinator import AddPartitions, Markers

__all__ = [
    "ClusterStatus",
    "ConfigStore",
    "CoordinatorLease",
    "Engine",
    "Leadership",
    "Node",
    "NodeInfo",
    "PartitionStore",
    "ProducerIds",
    "ShareStates",
    "StoredConfigs",
    "TopicRecord",
    "TopicStore",
]


class PartitionStore(Protocol):
    """One partition's log, as the broker uses it (every method on the event loop).

    Errors carry Kafka's ``error_code``: :class:`~samsa.log.LogError` for a refused append
    (nothing written), an :class:`OSError` (``error_code`` NOT_LEADER_OR_FOLLOWER when the
    lease moved, else KAFKA_STORAGE_ERROR) when a write cannot become durable.
    """

    config: LogConfig
    producers: ProducerStateManager
    """The idempotent producers and the transactions of the partition (the last stable
    offset and the aborted transactions read_committed fetches need)."""

    @property
    def closed(self) -> bool: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The offset after the last record readers may see (the high watermark)."""

    @property
    def flushed_offset(self) -> int:
        """Every offset below this one is durable."""

    @property
    def epoch(self) -> int | None:
        """The leader epoch this node writes with; None when it does not lead the partition
        (a single node leads every partition at epoch 0)."""

    @property
    def backlogged(self) -> bool:
        """Appends outrun durability (more bytes wait for it than the engine allows):
        acks=1 answers then wait for :meth:`wait_room`, as backpressure."""

    def append(self, records: bytes, now_ms: int,
               headers: list[BatchHeader] | None = None) -> AppendInfo:
        """Append whole v2 batches at the log end (see :func:`samsa.log.append.prepare`)."""

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one holding ``offset`` (at least one if any); b"" at the
        end (or while an engine fetches them); OffsetOutOfRange outside [start, end]."""

    async def wait_durable(self, offset: int) -> None:
        """Return once every offset below ``offset`` is durable (acks=all, group records)."""

    async def wait_room(self, offset: int) -> None:
        """While :attr:`backlogged`: return once ``offset`` is durable, or will never be."""

    async def read_all(self) -> list[bytes]:
        """Every batch from the log start, once every append accepted so far is durable
        (loading a coordinator shard); an OSError if this node lost the partition."""

    async def find_timestamp(self, ts_ms: int | None) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is ``ts_ms`` or later
        (ListOffsets by timestamp), or with None of the first record with the largest
        timestamp (MAX_TIMESTAMP); None when there is none. A shared engine reads its
        database without holding up the event loop; a local one answers at once."""

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """:meth:`find_timestamp`, blocking (a shared engine waits for its database): for
        callers that cannot await (a share partition's ``by_duration`` start that ShareFetch
        did not look up first)."""

    def reconfigure(self, config: LogConfig) -> None: ...

    def apply_retention(self, now_ms: int) -> int: ...

    async def run_compaction(self, now_ms: int) -> None:
        """Run a compaction pass if one is due (``cleanup.policy`` has compact)."""

    def flush(self, *, checkpoint: bool = False) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic as an engine stores it."""

    name: str
    topic_id: uuid.UUID
    overrides: Mapping[str, str]
    partitions: int


class TopicStore(Protocol):
    """Where an engine keeps the topic catalog. The catalog
    (:class:`~samsa.broker.topics.TopicManager`) validates every change first, then asks the
    store to persist it and re-reads the store's snapshot into its view."""

    def load(self, now_ms: int) -> None:
        """Prepare the stored catalog (a local engine sweeps deletions cut short)."""

    def snapshot(self) -> list[TopicRecord] | None:
        """The stored topics if they changed since the last snapshot, else None (a shared
        catalog is read again; may block on I/O)."""

    async def fetch(self) -> list[TopicRecord] | None:
        """:meth:`snapshot` without holding up the event loop (a shared catalog is read on
        the engine's own thread)."""

    def open_partition(self, topic: str, index: int, config: LogConfig, now_ms: int,
                       wake: Callable[[], None]) -> PartitionStore:
        """The store of a partition of the current snapshot; ``wake`` wakes the fetches
        waiting on it (an engine that loads data in the background calls it)."""

    async def create(self, record: TopicRecord) -> bool:
        """Persist a new topic; False if its name is taken (another node created it). A
        shared catalog is written without holding up the event loop (as are the changes
        below); a local one answers at once."""

    def create_now(self, record: TopicRecord) -> bool:
        """:meth:`create`, blocking (a shared catalog waits for its database): for callers
        that cannot await (a single node's ``__share_group_state``)."""

    async def add_partitions(self, name: str, current: int, total: int) -> None: ...

    async def alter(self, name: str, overrides: Mapping[str, str]) -> None: ...

    async def delete(self, name: str, topic_id: uuid.UUID) -> bool:
        """Forget the topic ``name`` of id ``topic_id`` and its data (its partition stores
        are closed first); False if no such topic is stored (another node or request
        deleted it first: only one deletion of a topic succeeds)."""


@dataclass(frozen=True, slots=True)
class StoredConfigs:
    """The dynamic configs an engine keeps (Kafka keeps them in the cluster metadata)."""

    #: ``BROKER`` resource name ("" the cluster-wide defaults, else a node id) -> settings
    brokers: Mapping[str, Mapping[str, str]]
    #: group id -> its group configs
    groups: Mapping[str, Mapping[str, str]]


class ConfigStore(Protocol):
    """Where an engine keeps the dynamic configs. The broker validates every change first,
    then asks the store to persist it and takes the store's answer as its view."""

    def snapshot(self) -> StoredConfigs | None:
        """The stored configs if they changed since the last snapshot or save, else None
        (a shared store is read again; may block on I/O)."""

    async def save_broker(self, name: str, props: Mapping[str, str]) -> StoredConfigs | None:
        """Replace the settings of ``BROKER`` resource ``name`` (empty: forget them);
        returns every stored config afterwards (other nodes' changes too), or None when a
        snapshot taken meanwhile is already as new. A shared store writes its database
        without holding up the event loop."""

    async def save_group(self, group_id: str, props: Mapping[str, str]
                         ) -> StoredConfigs | None:
        """Replace the configs of group ``group_id`` (empty: forget them); as
        :meth:`save_broker`."""


class ProducerIds(Protocol):
    def allocate(self) -> int:
        """A producer id never given out before (by this node or another)."""


class ShareStates(Protocol):
    """Share-partition states (KIP-932) kept by the engine, each with the partition whose
    lease it follows: one ShareSnapshot value (:mod:`samsa.share.records`) per share group
    of the partition. The partition's leader saves them, fenced by its lease epoch; the
    group's coordinator changes them from any node (the admin APIs)."""

    async def load(self, store: PartitionStore) -> dict[str, bytes]:
        """Share group id -> the stored snapshot of each share partition of ``store`` (read
        by a node that just took its lease, before it serves it)."""

    async def save(self, store: PartitionStore, group_id: str, value: bytes, seq: int) -> None:
        """Keep ``value`` as the group's state of ``store``, if this node still leads it at
        :attr:`PartitionStore.epoch` (else an OSError with NOT_LEADER_OR_FOLLOWER); ``seq``
        orders one node's saves (an older one that lands late is dropped, and so is one
        made before an admin change this node has not read yet)."""

    async def reset(self, group_id: str, value: bytes | None, topic: str | None = None,
                    index: int | None = None) -> None:
        """An admin change from any node: the group's state of partition ``index`` of
        ``topic`` becomes ``value``; with ``value`` None the group's states (of ``topic``
        only, when given) are forgotten. Leaders read it with :meth:`take_resets`."""

    async def take_resets(self) -> list[tuple[str, int, str, bytes | None]]:
        """(topic, partition, group, new state or None) of each admin change made since the
        last call that this node had not seen (nor made)."""

    async def read_group(self, group_id: str) -> list[tuple[str, int, bytes, int]]:
        """(topic, partition, stored snapshot, the partition's committed log end) of every
        share partition of the group (any node: the coordinator's admin answers)."""


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


@dataclass(frozen=True, slots=True, order=True)
class CoordinatorLease:
    """The lease of a coordinator shard, as a cluster node last read it."""

    #: Kafka's CoordinatorType name (what FindCoordinator's key_type stands for): ``GROUP``
    #: for a ``__consumer_offsets`` partition, ``TRANSACTION`` for a ``__transaction_state`` one
    type: str
    topic: str
    partition: int
    owner: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """A node's view of the cluster's leases (the console and the metrics)."""

    live_nodes: tuple[int, ...]
    """The nodes the last read found live."""
    #: every coordinator shard's lease (group shards, then transaction shards)
    coordinator_leases: tuple[CoordinatorLease, ...]
    #: leases of partitions held (coordinator shards not counted)
    partitions_held: int
    #: group coordinator shards held
    shards_held: int
    #: transaction coordinator shards held
    txn_shards_held: int = 0
    claims: int = 0
    takeovers: int = 0
    handoffs: int = 0
    lost: int = 0


class Leadership(Protocol):
    """Who leads what. A single node leads every partition at epoch 0; a cluster node
    answers from its last read of the leases."""

    @property
    def leases(self) -> bool:
        """True when leases decide who leads (a cluster): FindCoordinator names the lease
        holder. False on a single node, which answers from its shard's state."""

    def live_nodes(self) -> list[NodeInfo]: ...

    def leader(self, store: PartitionStore) -> tuple[int, int]:
        """(leader node id or -1 when none is live, leader epoch)."""

    def leader_error(self, store: PartitionStore, current_leader_epoch: int) -> ErrorCode:
        """NOT_LEADER_OR_FOLLOWER on a node that does not lead the partition; with the
        client's ``current_leader_epoch`` (-1: unknown), FENCED_LEADER_EPOCH when it is
        older than the leader's and UNKNOWN_LEADER_EPOCH when newer."""

    async def confirm(self, store: PartitionStore) -> bool:
        """Whether this node still holds the partition, as the source of truth says now
        (before an answer a stale holder must not give); a lease found gone is dropped."""

    def status(self) -> ClusterStatus | None:
        """The leases as this node sees them; None on a single node."""


def epoch_error(held: int | None, current_leader_epoch: int) -> ErrorCode:
    """:meth:`Leadership.leader_error` for a node holding ``held`` (None: not the leader)."""
    if held is None:
        return ErrorCode.not_leader_or_follower
    if current_leader_epoch >= 0:
        if current_leader_epoch < held:
            return ErrorCode.fenced_leader_epoch
        if current_leader_epoch > held:
            return ErrorCode.unknown_leader_epoch
    return ErrorCode.none


@dataclass(frozen=True, slots=True)
class Node:
    """What the broker tells its engine: itself, and what to do when things move."""

    config: BrokerConfig
    #: listener name -> advertised (host, port), filled in once the listeners are bound
    endpoints: Callable[[], Mapping[str, tuple[str, int]]]
    #: this node now holds coordinator shard ``index`` (lease ``epoch``, taken from
    #: ``previous`` node): load it; returns once loaded (or given up)
    on_shard_gained: Callable[[int, int | None, int | None], Awaitable[None]]
    #: this node no longer holds coordinator shard ``index``: unload it
    on_shard_lost: Callable[[int], None]
    #: the shared catalog changed: the topic view re-reads it
    on_topics_changed: Callable[[], object] = field(default=lambda: None)
    #: the stored ACLs are at ``version``: the authorizer reloads them if it has another
    on_acls_changed: Callable[[int], Awaitable[None]] | None = None
    #: this node now holds transaction coordinator shard ``index`` (``__transaction_state``;
    #: lease ``epoch``, taken from ``previous`` node): load it
    on_txn_shard_gained: Callable[[int, int | None, int | None], Awaitable[None]] | None = None
    #: this node no longer holds transaction coordinator shard ``index``: unload it
    on_txn_shard_lost: Callable[[int], None] = field(default=lambda index: None)
    #: write a transaction marker another node's coordinator forwarded to partition
    #: ``topic``-``index``, which this node leads: returns once it is durable (raises if it
    #: cannot be written)
    on_marker: Callable[[str, int, Markers], Awaitable[None]] | None = None
    #: add partitions to a transaction this node coordinates, for another node (KIP-890's
    #: implicit adds): the answer's error code
    on_txn_add: Callable[[AddPartitions], Awaitable[int]] | None = None
    #: this node now leads partition ``index`` of ``topic`` (before it serves it): its share
    #: partitions load their states
    on_partition_gained: Callable[[str, int], Awaitable[None]] | None = None
    #: this node no longer leads the partition: its share partitions go at once (the
    #: awaitable is done once their pending state saves are)
    on_partition_lost: Callable[[str, int], Awaitable[object]] | None = None
    #: another node changed share-partition states (:meth:`ShareStates.reset`): the
    #: partitions this node leads reload them
    on_share_resets: Callable[[], Awaitable[None]] | None = None
    #: another node changed the stored dynamic configs: the broker re-reads them
    on_configs_changed: Callable[[], object] = field(default=lambda: None)

    def self_info(self) -> NodeInfo:
        """This node as the others see it."""
        config = self.config
        return NodeInfo(config.node_id, config.advertised_host, config.advertised_port,
                        config.rack,
                        tuple((n, h, p) for n, (h, p) in self.endpoints().items()))


class Engine(Protocol):
    """A storage engine."""

    topics: TopicStore
    producer_ids: ProducerIds
    leadership: Leadership
    acls: AclStore
    credentials: CredentialStore
    configs: ConfigStore
    share_states: ShareStates | None
    """None: share-partition states go to ``__share_group_state`` through the partition
    stores (a single node)."""

    async def open(self, node: Node) -> None:
        """Connect (before the topics load); ``node`` is kept for the callbacks."""

    async def start(self) -> None:
        """The listeners are bound: join the cluster (claim leases) if there is one."""

    async def stop(self) -> None:
        """Hand what this node holds over to the others (before the logs close)."""

    def close(self) -> None: ...
