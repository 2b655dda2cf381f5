"""Topics on this node: names, ids, per-topic config overrides and partition logs.

Topic metadata (id, partition count, config overrides) is kept in ``topics.json`` in the
data directory, replaced atomically on every change; each partition's log lives in
``<data>/<topic>-<partition>/`` as in Kafka.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.dynamic_config import DynamicConfigs
from samsa.broker.partition import Partition
from samsa.log import LogConfig, PartitionLog

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

# Broker-level defaults of topic configs, Kafka's server.properties name → topic name.
BROKER_TO_TOPIC = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "message.max.bytes": "max.message.bytes",
}


class TopicError(Exception):
    """A topic operation refused with a Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate_topic_name(name: str | None) -> str | None:
    """Kafka's topic name rules; returns a reason when ``name`` is illegal."""
    if not name:
        return "Topic name is empty"
    if name in (".", ".."):
        return f"Topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return f"Topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'"
    return None


@dataclass(eq=False)
class Topic:
    """A topic: its id, config overrides and partitions."""

    name: str
    topic_id: uuid.UUID
    overrides: dict[str, str]
    partitions: list[Partition] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicManager:
    """Creates, opens, grows and deletes topics under one data directory."""

    def __init__(self, config: BrokerConfig, dynamic: DynamicConfigs | None = None) -> None:
        self.config = config
        self.dynamic = dynamic if dynamic is not None else DynamicConfigs(config)
        self.data_dir = config.data_dir
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    # -- lookup -------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self._topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._topics.values()))

    def __len__(self) -> int:
        return len(self._topics)

    # -- configs ------------------------------------------------------------------------
    def broker_log_defaults(self, broker: BrokerConfig | None = None) -> dict[str, str]:
        """Topic-level defaults implied by the broker's ``log.*`` settings (static and
        dynamic, or those of ``broker``)."""
        cfg = broker or self.dynamic.effective
        out: dict[str, str] = {}
        for broker_name, topic_name in BROKER_TO_TOPIC.items():
            out[topic_name] = str(cfg[broker_name])
        return out

    def log_config(self, overrides: Mapping[str, str], name: str = "",
                   broker: BrokerConfig | None = None) -> LogConfig:
        """A topic's effective log config; raises ValueError naming a bad key or value."""
        merged = self.broker_log_defaults(broker)
        if name == OFFSETS_TOPIC:
            merged["cleanup.policy"] = "compact"
            merged["segment.bytes"] = str(self.config["offsets.topic.segment.bytes"])
        merged.update(overrides)
        return LogConfig.from_mapping(merged)

    # -- lifecycle ----------------------------------------------------------------------
    def load(self, now_ms: int) -> None:
        """Open every topic recorded in ``topics.json`` (recovering their logs)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.dynamic.load()
        for leftover in self.data_dir.glob("*.deleted"):  # a deletion cut short by a crash
            shutil.rmtree(leftover, ignore_errors=True)
        meta = self._meta_path()
        if not meta.exists():
            return
        records = json.loads(meta.read_text())
        for name, rec in records.items():
            topic = Topic(name, uuid.UUID(rec["id"]), dict(rec.get("configs", {})))
            config = self.log_config(topic.overrides, name)
            for p in range(int(rec["partitions"])):
                log = PartitionLog.open(self._dir(name, p), config, now_ms=now_ms)
                topic.partitions.append(Partition(name, p, log))
            self._add(topic)

    def create(
        self,
        name: str,
        num_partitions: int,
        overrides: Mapping[str, str] | None = None,
        *,
        now_ms: int,
        validate_only: bool = False,
    ) -> Topic:
        """Create a topic; raises :class:`TopicError` with Kafka's error codes."""
        reason = validate_topic_name(name)
        if reason:
            raise TopicError(ErrorCode.invalid_topic_exception, reason)
        if name in self._topics:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(ErrorCode.invalid_partitions,
                             "Number of partitions must be larger than 0.")
        overrides = dict(overrides or {})
        try:
            config = self.log_config(overrides, name)
        except ValueError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        topic = Topic(name, uuid.uuid4(), overrides)
        if validate_only:
            return topic
        for p in range(num_partitions):
            topic.partitions.append(Partition(name, p, self._open_new(name, p, config, now_ms)))
        self._add(topic)
        self._save()
        return topic

    def add_partitions(
        self, name: str, total: int, *, now_ms: int, validate_only: bool = False
    ) -> Topic:
        """Grow ``name`` to ``total`` partitions (CreatePartitions)."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             f"Topic '{name}' does not exist.")
        current = len(topic.partitions)
        if total <= current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, {total} would not be an increase."
            )
        if validate_only:
            return topic
        config = self.log_config(topic.overrides, name)
        for p in range(current, total):
            topic.partitions.append(Partition(name, p, self._open_new(name, p, config, now_ms)))
        self._save()
        return topic

    def alter(self, name: str, overrides: Mapping[str, str], *,
              validate_only: bool = False) -> Topic:
        """Replace a topic's config overrides (AlterConfigs): validated, persisted and
        applied to its partitions at once; raises :class:`TopicError` (INVALID_CONFIG,
        UNKNOWN_TOPIC_OR_PARTITION) and then changes nothing."""
        overrides = dict(overrides)
        try:
            config = self.log_config(overrides, name)
        except ValueError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             f"Topic '{name}' does not exist.")
        if validate_only:
            return topic
        previous = topic.overrides
        topic.overrides = overrides
        try:
            self._save()
        except OSError:
            topic.overrides = previous
            raise
        for part in topic.partitions:
            part.log.reconfigure(config)
        return topic

    def check_broker_defaults(self, broker: BrokerConfig) -> None:
        """Raise ValueError if ``broker``'s log settings are not valid topic defaults, or
        would make a topic's config invalid."""
        self.log_config({}, "", broker)
        for topic in self._topics.values():
            self.log_config(topic.overrides, topic.name, broker)

    def reconfigure_all(self) -> None:
        """Re-apply every topic's config (after the broker's dynamic defaults changed)."""
        for topic in self._topics.values():
            config = self.log_config(topic.overrides, topic.name)
            for part in topic.partitions:
                part.log.reconfigure(config)

    def delete(self, name: str) -> Topic:
        """Delete a topic and its data."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        if topic.internal:
            raise TopicError(ErrorCode.invalid_topic_exception,
                             f"Internal topic {name} cannot be deleted.")
        del self._topics[name]
        del self._by_id[topic.topic_id]
        # Move the data aside before topics.json forgets the topic, so a crash in between
        # never leaves a directory that a new topic of the same name would reopen.
        doomed = []
        for part in topic.partitions:
            part.notify()
            part.log.close()
            aside = part.log.directory.with_name(
                f"{part.log.directory.name}.{topic.topic_id.hex}.deleted")
            os.replace(part.log.directory, aside)
            doomed.append(aside)
        self._save()
        for aside in doomed:
            shutil.rmtree(aside, ignore_errors=True)
        return topic

    def close(self) -> None:
        for topic in self._topics.values():
            for part in topic.partitions:
                part.log.close()

    # -- internals ----------------------------------------------------------------------
    def _add(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _open_new(self, name: str, partition: int, config: LogConfig, now_ms: int) -> PartitionLog:
        """Open the log of a partition that did not exist: a directory already there is an
        orphan (a create cut short before topics.json was written) and is cleared."""
        directory = self._dir(name, partition)
        if directory.exists():
            shutil.rmtree(directory)
        return PartitionLog.open(directory, config, now_ms=now_ms)

    def _dir(self, name: str, partition: int) -> Path:
        return self.data_dir / f"{name}-{partition}"

    def _meta_path(self) -> Path:
        return self.data_dir / "topics.json"

    def _save(self) -> None:
        records = {
            t.name: {"id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.overrides}
            for t in self._topics.values()
        }
        tmp = self._meta_path().with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(records, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._meta_path())
        dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
