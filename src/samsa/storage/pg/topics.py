"""Topics kept in PostgreSQL, shared by every node of the cluster.

Each node keeps the same in-memory view as :class:`~samsa.broker.topics.TopicManager`
(handlers read it synchronously) and re-reads it from the database when the
``topics_version`` counter moved (checked on every lease tick) or when a name or id it does
not know is asked for. Changes (create, grow, alter, delete) are one transaction each,
bumping the counter; the other nodes pick them up on their next tick.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.dynamic_config import DynamicConfigs
from samsa.broker.partition import Partition
from samsa.broker.topics import Topic, TopicError, TopicManager, validate_topic_name
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import PgPartitionLog

log = logging.getLogger("samsa.storage.pg")

_BUMP = "UPDATE samsa_meta SET v = v + 1 WHERE k = 'topics_version'"


class PgTopicManager(TopicManager):
    """A :class:`TopicManager` whose topics and partition logs live in PostgreSQL."""

    def __init__(self, config: BrokerConfig, engine: PgEngine,
                 dynamic: DynamicConfigs | None = None) -> None:
        super().__init__(config, dynamic)
        self.engine = engine
        self.version = -1
        self.by_pid: dict[int, Partition] = {}

    # -- reading the shared view ----------------------------------------------------------
    def load(self, now_ms: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.dynamic.load()
        self.refresh()

    def refresh(self) -> bool:
        """Re-read topics from the database (blocking); True if anything changed."""
        return self.apply(self.engine.db.run_sync(fetch_topics))

    def apply(self, snapshot: tuple[int, list[Any], list[Any]]) -> bool:
        """Bring the in-memory view to ``snapshot`` (from :func:`fetch_topics`)."""
        version, topic_rows, part_rows = snapshot
        if version == self.version:
            return False
        self.version = version
        parts: dict[str, list[tuple[int, int]]] = {}
        for r in part_rows:
            parts.setdefault(r["topic"], []).append((r["idx"], r["pid"]))
        seen = set()
        for r in topic_rows:
            name = r["name"]
            seen.add(name)
            overrides = json.loads(r["configs"]) if isinstance(r["configs"], str) else r["configs"]
            topic = self._topics.get(name)
            if topic is not None and topic.topic_id != r["id"]:
                self._forget(topic)  # deleted and re-created meanwhile
                topic = None
            if topic is None:
                topic = Topic(name, r["id"], dict(overrides))
                self._add(topic)
            elif topic.overrides != overrides:
                topic.overrides = dict(overrides)
                config = self.log_config(topic.overrides, name)
                for part in topic.partitions:
                    part.log.reconfigure(config)
            config = self.log_config(topic.overrides, name)
            for idx, pid in sorted(parts.get(name, [])):
                if idx == len(topic.partitions):
                    self._open(topic, idx, pid, config)
        for name in [n for n in self._topics if n not in seen]:
            self._forget(self._topics[name])
        return True

    def _open(self, topic: Topic, idx: int, pid: int, config: Any) -> None:
        plog = PgPartitionLog(self.engine, pid, topic.name, idx, config)
        part = Partition(topic.name, idx, plog)  # type: ignore[arg-type]
        plog.on_data = part.notify
        topic.partitions.append(part)
        self.by_pid[pid] = part

    def _forget(self, topic: Topic) -> None:
        self._topics.pop(topic.name, None)
        self._by_id.pop(topic.topic_id, None)
        for part in topic.partitions:
            plog = part.log
            assert isinstance(plog, PgPartitionLog)
            self.by_pid.pop(plog.pid, None)
            plog.close()
            part.notify()

    def get(self, name: str) -> Topic | None:
        topic = self._topics.get(name)
        if topic is None and not validate_topic_name(name) and self.refresh():
            topic = self._topics.get(name)
        return topic

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        topic = self._by_id.get(topic_id)
        if topic is None and self.refresh():
            topic = self._by_id.get(topic_id)
        return topic

    # -- changes ------------------------------------------------------------------------
    def create(self, name: str, num_partitions: int, overrides: Mapping[str, str] | None = None,
               *, now_ms: int, validate_only: bool = False) -> Topic:
        reason = validate_topic_name(name)
        if reason:
            raise TopicError(ErrorCode.invalid_topic_exception, reason)
        if self.get(name) is not None:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(ErrorCode.invalid_partitions,
                             "Number of partitions must be larger than 0.")
        overrides = dict(overrides or {})
        try:
            self.log_config(overrides, name)
        except ValueError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        topic_id = uuid.uuid4()
        if validate_only:
            return Topic(name, topic_id, overrides)

        async def job(pool: Any) -> bool:
            async with pool.acquire() as conn, conn.transaction():
                done = await conn.fetchval(
                    "INSERT INTO samsa_topics (name, id, configs) VALUES ($1, $2, $3::jsonb) "
                    "ON CONFLICT DO NOTHING RETURNING true", name, topic_id, json.dumps(overrides))
                if not done:
                    return False
                await conn.execute(
                    "INSERT INTO samsa_partitions (topic, idx) SELECT $1, g "
                    "FROM generate_series(0, $2 - 1) g", name, num_partitions)
                await conn.execute(_BUMP)
                await conn.execute("NOTIFY samsa_cluster")
                return True

        created = self.engine.db.run_sync(job)
        self.refresh()
        topic = self._topics.get(name)
        if not created or topic is None or topic.topic_id != topic_id:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        return topic

    def add_partitions(self, name: str, total: int, *, now_ms: int,
                       validate_only: bool = False) -> Topic:
        topic = self.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             f"Topic '{name}' does not exist.")
        current = len(topic.partitions)
        if total <= current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, {total} would not be an increase.")
        if validate_only:
            return topic

        async def job(pool: Any) -> None:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    "INSERT INTO samsa_partitions (topic, idx) SELECT $1, g "
                    "FROM generate_series($2, $3 - 1) g ON CONFLICT DO NOTHING",
                    name, current, total)
                await conn.execute(_BUMP)
                await conn.execute("NOTIFY samsa_cluster")

        self.engine.db.run_sync(job)
        self.refresh()
        return topic

    def alter(self, name: str, overrides: Mapping[str, str], *,
              validate_only: bool = False) -> Topic:
        overrides = dict(overrides)
        try:
            config = self.log_config(overrides, name)
        except ValueError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        topic = self.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             f"Topic '{name}' does not exist.")
        if validate_only:
            return topic

        async def job(pool: Any) -> None:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("UPDATE samsa_topics SET configs = $2::jsonb WHERE name = $1",
                                   name, json.dumps(overrides))
                await conn.execute(_BUMP)
                await conn.execute("NOTIFY samsa_cluster")

        self.engine.db.run_sync(job)
        topic.overrides = overrides
        for part in topic.partitions:
            part.log.reconfigure(config)
        return topic

    def delete(self, name: str) -> Topic:
        topic = self.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        if topic.internal:
            raise TopicError(ErrorCode.invalid_topic_exception,
                             f"Internal topic {name} cannot be deleted.")

        async def job(pool: Any) -> None:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    "DELETE FROM samsa_batches WHERE pid IN "
                    "(SELECT pid FROM samsa_partitions WHERE topic = $1)", name)
                await conn.execute("DELETE FROM samsa_topics WHERE name = $1", name)
                await conn.execute(_BUMP)
                await conn.execute("NOTIFY samsa_cluster")

        self.engine.db.run_sync(job)
        self._forget(topic)
        return topic

    def close(self) -> None:
        for topic in self._topics.values():
            for part in topic.partitions:
                part.log.close()

    def _save(self) -> None:  # pragma: no cover - everything is saved in the database
        raise AssertionError("PgTopicManager keeps topics in the database")


async def fetch_topics(pool: Any) -> tuple[int, list[Any], list[Any]]:
    """(topics_version, topic rows, partition rows) in one snapshot."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read",
                                                        readonly=True):
        version = await conn.fetchval("SELECT v FROM samsa_meta WHERE k = 'topics_version'")
        topics = await conn.fetch("SELECT name, id, configs FROM samsa_topics ORDER BY name")
        parts = await conn.fetch("SELECT pid, topic, idx FROM samsa_partitions ORDER BY pid")
    return int(version), list(topics), list(parts)
