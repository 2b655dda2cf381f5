"""An in-memory storage engine that injects faults (the test double of franz-go's kfake
``persist_fs.go``): the broker's storage port (:mod:`samsa.broker.storage`) over a
:class:`MemoryDatabase` that several engines (nodes) may share.

Like the PostgreSQL engine, a node writes a partition only while it holds the partition's
lease, appends are committed in the background (readers see them, and ``wait_durable``
returns, once committed) and every commit is fenced by the lease epoch it was written
under. Faults, injected through public hooks:

* :meth:`MemoryDatabase.fail_appends`: the next appends raise (a full disk, a lost
  connection): nothing is written;
* :meth:`MemoryDatabase.lose_lease`: the lease moves behind the holder's back (it was
  paused past its TTL): its pending and later commits are refused; ``tell`` also tells the
  node, as its next lease tick would (a coordinator shard is unloaded);
* :meth:`MemoryDatabase.hold_commits` / :meth:`MemoryDatabase.release_commits`: commits
  wait (a slow database): acks=all answers and group replies wait with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.storage import (
    ClusterStatus,
    Node,
    NodeInfo,
    PartitionStore,
    TopicRecord,
    epoch_error,
)
from samsa.broker.topics import OFFSETS_TOPIC
from samsa.log import AppendInfo, LogConfig, LogError, OffsetOutOfRange
from samsa.log.append import prepare
from samsa.log.compaction import CleanPolicy, KeyMap, add_to_key_map, clean_batch
from samsa.log.producer_state import ProducerStateManager
from samsa.log.records import record_at_or_after
from samsa.protocol.batch import BatchHeader, parse_header, patch_base_offset
from samsa.security.acl import AclBinding
from samsa.security.credentials import CredentialStore
from samsa.storage.local.configs import LocalConfigStore
from samsa.storage.waiters import Waiters


class NotLeader(LogError):
    error_code = ErrorCode.not_leader_or_follower


class LeaseLost(OSError):
    error_code = ErrorCode.not_leader_or_follower


@dataclass
class Row:
    """One partition in the database: its batches and its lease."""

    batches: list[tuple[BatchHeader, bytes]] = field(default_factory=list)
    log_start: int = 0
    owner: int | None = None
    epoch: int = 0

    @property
    def log_end(self) -> int:
        return self.batches[-1][0].next_offset if self.batches else self.log_start


class MemoryDatabase:
    """What the nodes share: topics, partitions, leases, producer ids, ACLs, users."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicRecord] = {}
        self.version = 0
        self.rows: dict[tuple[str, int], Row] = {}
        self.next_producer_id = 0
        self.acls: set[AclBinding] = set()
        self.acls_version = 0
        self.stores: dict[tuple[int, str, int], MemoryPartition] = {}
        """(node, topic, index) -> the node's open store."""
        self._failing = 0
        self._held = False
        self._gate = asyncio.Event()
        self.lost: Callable[[int, str, int], None] = lambda node, topic, index: None

    # -- faults ---------------------------------------------------------------------------
    def fail_appends(self, count: int = 1) -> None:
        """The next ``count`` appends raise OSError and write nothing."""
        self._failing = count

    def lose_lease(self, topic: str, index: int, *, tell: bool = False) -> None:
        """Another node takes the partition's lease (epoch + 1); with ``tell``, the holder
        learns it at once (as at its next tick)."""
        row = self.rows[(topic, index)]
        holder = row.owner
        row.owner, row.epoch = None, row.epoch + 1
        if holder is not None and tell:
            self.lost(holder, topic, index)

    def hold_commits(self) -> None:
        self._held = True
        self._gate.clear()

    def release_commits(self) -> None:
        self._held = False
        self._gate.set()

    def _check_append(self) -> None:
        if self._failing:
            self._failing -= 1
            raise OSError(28, "No space left on device (injected)")

    async def _commit_gate(self) -> None:
        while self._held:
            await self._gate.wait()

    def claim(self, node: int, topic: str, index: int) -> int:
        """Take a free lease (or one's own); its new epoch."""
        row = self.rows[(topic, index)]
        assert row.owner in (None, node), f"{topic}-{index} is held by node {row.owner}"
        row.owner, row.epoch = node, row.epoch + 1
        return row.epoch


class MemoryPartition:
    """A :class:`~samsa.broker.storage.PartitionStore` in a :class:`MemoryDatabase`."""

    backlogged = False

    def __init__(self, db: MemoryDatabase, node: int, topic: str, index: int,
                 config: LogConfig, wake: Callable[[], None] = lambda: None) -> None:
        self.db, self.node, self.topic, self.index = db, node, topic, index
        self.config = config
        self.wake = wake
        self.epoch: int | None = None
        self.producers = ProducerStateManager()
        self._committed = 0
        self._next = 0
        self._pending: list[tuple[BatchHeader, bytes]] = []
        self._waiters = Waiters()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        db.stores[(node, topic, index)] = self

    @property
    def row(self) -> Row:
        return self.db.rows[(self.topic, self.index)]

    # -- leadership ---------------------------------------------------------------------------
    def lead(self, epoch: int) -> None:
        """Lead at ``epoch``: offsets and producer state from the database."""
        self.lose()
        row = self.row
        self.producers = ProducerStateManager()
        for header, _ in row.batches:
            if header.producer_id >= 0:
                self.producers.replay(header)
        self._committed = self._next = row.log_end
        self.epoch = epoch

    def lose(self) -> None:
        self.epoch = None
        self._pending = []
        self.producers = ProducerStateManager()
        self._waiters.fail(LeaseLost(f"{self.topic}-{self.index}: lease lost"))
        self.wake()

    # -- the port ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self.row.log_start

    @property
    def log_end_offset(self) -> int:
        return self._committed

    @property
    def flushed_offset(self) -> int:
        return self._committed

    def append(self, records: bytes, now_ms: int,
               headers: list[BatchHeader] | None = None) -> AppendInfo:
        if self.epoch is None:
            raise NotLeader(f"node {self.node} does not lead {self.topic}-{self.index}")
        self.db._check_append()
        prepared = prepare(records, headers, self.config, self.producers, self._next,
                           self.row.log_start, now_ms)
        if isinstance(prepared, AppendInfo):
            return prepared
        for h in prepared.headers:
            data = bytearray(prepared.buf[h.position:h.end])
            patch_base_offset(data, 0, h.base_offset)
            self._pending.append((parse_header(data), bytes(data)))
        info = prepared.done(self.producers, self.row.log_start)
        self._next = prepared.next_offset
        self.kick()
        return info

    def kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._commit())

    async def _commit(self) -> None:
        """Commit the pending batches under the epoch they were appended with (refused,
        and the lease found lost, if the row moved on)."""
        await asyncio.sleep(0)
        while self._pending:
            await self.db._commit_gate()
            epoch, pending, self._pending = self.epoch, self._pending, []
            row = self.row
            if epoch is None or row.owner != self.node or row.epoch != epoch:
                if epoch is not None and epoch == self.epoch:
                    self.lose()
                return
            row.batches.extend(pending)
            self._committed = row.log_end
            self._waiters.reached(self._committed)
            self.wake()

    async def wait_durable(self, offset: int) -> None:
        if self._committed >= offset:
            return
        if self.epoch is None:
            raise LeaseLost(f"{self.topic}-{self.index}: not the leader")
        await self._waiters.wait(offset)

    async def wait_room(self, offset: int) -> None:
        pass

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        start, end = self.row.log_start, self._committed
        if offset < start or offset > end:
            raise OffsetOutOfRange(f"offset {offset} not in [{start}, {end}]")
        out: list[bytes] = []
        size = 0
        for header, data in self.row.batches:
            if header.next_offset <= offset or header.base_offset >= end:
                continue
            if out and size + len(data) > max_bytes:
                break
            out.append(data)
            size += len(data)
        return b"".join(out)

    async def read_all(self) -> list[bytes]:
        await self.wait_durable(self._next)
        return [data for _, data in self.row.batches]

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        start = self.row.log_start
        for header, data in self.row.batches:
            if header.max_timestamp >= ts_ms and header.next_offset > start:
                return record_at_or_after(data, header, ts_ms, start)
        return None

    async def find_timestamp(self, ts_ms: int | None) -> tuple[int, int] | None:
        if ts_ms is None:
            tops = [h.max_timestamp for h, _ in self.row.batches if h.max_timestamp >= 0]
            if not tops:
                return None
            ts_ms = max(tops)
        return self.offset_for_timestamp(ts_ms)

    def reconfigure(self, config: LogConfig) -> None:
        self.config = config

    def apply_retention(self, now_ms: int) -> int:
        return 0

    async def run_compaction(self, now_ms: int) -> None:
        """The latest record of each key in every batch but the last."""
        row = self.row
        if self.epoch is None or len(row.batches) < 2:
            return
        key_map: KeyMap = {}
        for header, data in row.batches:
            add_to_key_map(key_map, header, data)
        policy = CleanPolicy(key_map, now_ms - self.config.delete_retention_ms)
        cleaned: list[tuple[BatchHeader, bytes]] = []
        for header, data in row.batches[:-1]:
            out = clean_batch(header, data, policy)
            if out is not None:
                cleaned.append((parse_header(out), bytes(out)))
        row.batches[:-1] = cleaned

    def flush(self, *, checkpoint: bool = False) -> int:
        return self._committed

    def close(self) -> None:
        self._closed = True
        self.lose()


class MemoryTopics:
    """The :class:`~samsa.broker.storage.TopicStore` of a node."""

    def __init__(self, db: MemoryDatabase, node: int) -> None:
        self.db, self.node = db, node
        self._seen = -1

    def load(self, now_ms: int) -> None:
        pass

    def snapshot(self) -> list[TopicRecord] | None:
        if self._seen == self.db.version:
            return None
        self._seen = self.db.version
        return list(self.db.topics.values())

    async def fetch(self) -> list[TopicRecord] | None:
        return self.snapshot()

    def open_partition(self, topic: str, index: int, config: LogConfig, now_ms: int,
                       wake: Callable[[], None]) -> MemoryPartition:
        return MemoryPartition(self.db, self.node, topic, index, config, wake)

    async def create(self, record: TopicRecord) -> bool:
        return self.create_now(record)

    def create_now(self, record: TopicRecord) -> bool:
        if record.name in self.db.topics:
            return False
        self.db.topics[record.name] = record
        for i in range(record.partitions):
            self.db.rows[(record.name, i)] = Row()
        self.db.version += 1
        return True

    async def add_partitions(self, name: str, current: int, total: int) -> None:
        rec = self.db.topics[name]
        self.db.topics[name] = TopicRecord(name, rec.topic_id, rec.overrides, total)
        for i in range(current, total):
            self.db.rows[(name, i)] = Row()
        self.db.version += 1

    async def alter(self, name: str, overrides: Mapping[str, str]) -> None:
        rec = self.db.topics[name]
        self.db.topics[name] = TopicRecord(name, rec.topic_id, dict(overrides), rec.partitions)
        self.db.version += 1

    async def delete(self, name: str, topic_id: uuid.UUID) -> bool:
        rec = self.db.topics.get(name)
        if rec is None or rec.topic_id != topic_id:
            return False
        del self.db.topics[name]
        for i in range(rec.partitions):
            self.db.rows.pop((name, i), None)
        self.db.version += 1
        return True


class MemoryProducerIds:
    def __init__(self, db: MemoryDatabase) -> None:
        self.db = db

    def allocate(self) -> int:
        self.db.next_producer_id += 1
        return self.db.next_producer_id - 1


class MemoryAcls:
    def __init__(self, db: MemoryDatabase) -> None:
        self.db = db

    async def load(self) -> tuple[int, list[AclBinding]]:
        return self.db.acls_version, sorted(self.db.acls)

    async def add(self, acls: list[AclBinding]) -> int:
        self.db.acls.update(acls)
        self.db.acls_version += 1
        return self.db.acls_version

    async def remove(self, acls: list[AclBinding]) -> int:
        self.db.acls.difference_update(acls)
        self.db.acls_version += 1
        return self.db.acls_version


class MemoryEngine:
    """One node over a :class:`MemoryDatabase`: it claims every partition at start (a
    cluster of one, with leases) and hands coordinator shards to the broker as the cluster
    does (``on_shard_gained`` / ``on_shard_lost``)."""

    def __init__(self, config: BrokerConfig, db: MemoryDatabase | None = None) -> None:
        self.config = config
        self.db = db if db is not None else MemoryDatabase()
        self.node_id = config.node_id
        self.topics = MemoryTopics(self.db, self.node_id)
        self.producer_ids = MemoryProducerIds(self.db)
        self.acls = MemoryAcls(self.db)
        self.credentials = CredentialStore()
        self.configs = LocalConfigStore(config.data_dir)
        self.leadership = self
        self.share_states = None
        self.node: Node | None = None
        self.db.lost = self._lost

    # -- life cycle ---------------------------------------------------------------------------
    async def open(self, node: Node) -> None:
        self.node = node

    async def start(self) -> None:
        """Claim every free partition (new ones too: :meth:`claim_all` again)."""
        await self.claim_all()

    async def claim_all(self) -> None:
        assert self.node is not None
        for (node, topic, index), store in list(self.db.stores.items()):
            row = self.db.rows.get((topic, index))
            if node != self.node_id or store.epoch is not None or row is None \
                    or row.owner not in (None, self.node_id):
                continue
            store.lead(self.db.claim(self.node_id, topic, index))
            if topic == OFFSETS_TOPIC:
                await self.node.on_shard_gained(index, None, store.epoch)

    async def stop(self) -> None:
        pass

    def close(self) -> None:
        pass

    def _lost(self, node: int, topic: str, index: int) -> None:
        store = self.db.stores.get((node, topic, index))
        if node != self.node_id or store is None:
            return
        store.lose()
        if topic == OFFSETS_TOPIC and self.node is not None:
            self.node.on_shard_lost(index)

    # -- leadership ---------------------------------------------------------------------------
    @property
    def leases(self) -> bool:
        return True

    def _store(self, store: PartitionStore) -> MemoryPartition:
        assert isinstance(store, MemoryPartition)
        return store

    def live_nodes(self) -> list[NodeInfo]:
        assert self.node is not None
        return [self.node.self_info()]

    def leader(self, store: PartitionStore) -> tuple[int, int]:
        row = self._store(store).row
        return (-1 if row.owner is None else row.owner), row.epoch

    def leader_error(self, store: PartitionStore, current_leader_epoch: int) -> ErrorCode:
        return epoch_error(store.epoch, current_leader_epoch)

    async def confirm(self, store: PartitionStore) -> bool:
        mine = self._store(store)
        row = mine.row
        if mine.epoch is not None and (row.owner, row.epoch) == (self.node_id, mine.epoch):
            return True
        with contextlib.suppress(KeyError):
            self._lost(self.node_id, mine.topic, mine.index)
        return False

    def status(self) -> ClusterStatus | None:
        return None

