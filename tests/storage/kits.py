"""One kit per storage engine for the contract test: a partition led by node 1, taken over
by node 2 (engines with leases), opened again (a restart), compacted; the engine's topic
store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from samsa.broker.storage import PartitionStore, TopicStore
from samsa.log import LogConfig
from samsa.storage.local import LocalPartition, LocalTopicStore
from samsa.storage.local.flusher import Flusher
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import PgPartitionLog
from tests.storage.memory import MemoryDatabase, MemoryPartition, MemoryTopics, Row


def now_ms() -> int:
    return int(time.time() * 1000)


class Kit:
    """What the contract needs of an engine beyond the port."""

    leases = True

    def __init__(self, tmp: Path, dsn: str) -> None:
        self.tmp, self.dsn = tmp, dsn

    async def lead(self, config: LogConfig | None = None) -> PartitionStore:
        """A fresh partition this node (1) leads."""
        raise NotImplementedError

    async def take_over(self, store: PartitionStore) -> PartitionStore:
        """Node 2 takes the partition's lease (its holder was paused past its TTL)."""
        raise NotImplementedError

    async def reopen(self, store: PartitionStore) -> PartitionStore:
        """The partition opened again by its node (a restart): what it loads."""
        raise NotImplementedError

    async def compact(self, store: PartitionStore, now: int) -> None:
        """A compaction pass, finished."""
        await store.run_compaction(now)

    def topics(self) -> TopicStore:
        """Node 1's topic store, loaded."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalKit(Kit):
    leases = False

    def __init__(self, tmp: Path, dsn: str) -> None:
        super().__init__(tmp, dsn)
        self.flusher = Flusher()
        self.dirs: dict[int, Path] = {}
        self.open: list[LocalPartition] = []

    def _open(self, directory: Path, config: LogConfig) -> LocalPartition:
        log = LocalPartition.open_with(directory, config, self.flusher, now_ms=now_ms())
        self.open.append(log)
        self.dirs[id(log)] = directory
        return log

    async def lead(self, config: LogConfig | None = None) -> PartitionStore:
        return self._open(self.tmp / f"t-{len(self.dirs)}", config or LogConfig())

    async def reopen(self, store: PartitionStore) -> PartitionStore:
        store.close()
        return self._open(self.dirs[id(store)], store.config)

    def topics(self) -> TopicStore:
        store = LocalTopicStore(self.tmp / "catalog", self.flusher)
        store.load(now_ms())
        return store

    def close(self) -> None:
        for log in self.open:
            log.close()
        self.flusher.close()


class PgKit(Kit):
    def __init__(self, tmp: Path, dsn: str) -> None:
        super().__init__(tmp, dsn)
        self.engines: dict[int, PgEngine] = {}
        self.logs: list[PgPartitionLog] = []

    def _engine(self, node: int) -> PgEngine:
        if node not in self.engines:
            engine = PgEngine(self.dsn, node)
            engine.open()
            self.engines[node] = engine
        return self.engines[node]

    async def _claim(self, node: int, pid: int, config: LogConfig) -> PgPartitionLog:
        engine = self._engine(node)
        row = await engine.db.run(lambda pool: pool.fetchrow(
            "UPDATE samsa_partitions SET owner = $2, epoch = epoch + 1 WHERE pid = $1 "
            "RETURNING epoch, log_start, log_end", pid, node))
        plog = PgPartitionLog(engine, pid, "t", 0, config)
        await plog.become_leader(row["epoch"], row["log_start"], row["log_end"])
        self.logs.append(plog)
        return plog

    async def lead(self, config: LogConfig | None = None) -> PartitionStore:
        async def make(pool: Any) -> int:
            name = f"t{len(self.logs)}"
            await pool.execute("INSERT INTO samsa_topics (name, id) VALUES ($1, "
                               "gen_random_uuid())", name)
            return int(await pool.fetchval("INSERT INTO samsa_partitions (topic, idx) "
                                           "VALUES ($1, 0) RETURNING pid", name))

        pid = await self._engine(1).db.run(make)
        return await self._claim(1, pid, config or LogConfig())

    async def take_over(self, store: PartitionStore) -> PartitionStore:
        assert isinstance(store, PgPartitionLog)
        return await self._claim(2, store.pid, store.config)

    async def reopen(self, store: PartitionStore) -> PartitionStore:
        assert isinstance(store, PgPartitionLog)
        store.close()
        return await self._claim(store.engine.node_id, store.pid, store.config)

    def topics(self) -> TopicStore:
        return self._engine(1).topics

    async def compact(self, store: PartitionStore, now: int) -> None:
        assert isinstance(store, PgPartitionLog)
        await store.run_compaction(now)
        if store._busy is not None:  # the pass runs in the background
            await store._busy

    def close(self) -> None:
        for plog in self.logs:
            plog.close()
        for engine in self.engines.values():
            engine.close()


class MemoryKit(Kit):
    def __init__(self, tmp: Path, dsn: str) -> None:
        super().__init__(tmp, dsn)
        self.db = MemoryDatabase()

    def _open(self, node: int, topic: str, config: LogConfig) -> MemoryPartition:
        store = MemoryPartition(self.db, node, topic, 0, config)
        store.lead(self.db.claim(node, topic, 0))
        return store

    async def lead(self, config: LogConfig | None = None) -> PartitionStore:
        topic = f"t{len(self.db.rows)}"
        self.db.rows[(topic, 0)] = Row()
        return self._open(1, topic, config or LogConfig())

    def topics(self) -> TopicStore:
        return MemoryTopics(self.db, 1)

    async def take_over(self, store: PartitionStore) -> PartitionStore:
        assert isinstance(store, MemoryPartition)
        self.db.lose_lease(store.topic, 0)
        return self._open(2, store.topic, store.config)

    async def reopen(self, store: PartitionStore) -> PartitionStore:
        assert isinstance(store, MemoryPartition)
        store.close()
        return self._open(store.node, store.topic, store.config)


KITS: dict[str, type[Kit]] = {"local": LocalKit, "postgresql": PgKit, "memory": MemoryKit}
