"""The topic catalog: names, ids, per-topic config overrides and partition stores.

:class:`TopicManager` validates every change with Kafka's rules and error codes, keeps the
in-memory view the handlers read synchronously, and leaves persistence to the engine's
:class:`~samsa.broker.storage.TopicStore` (``topics.json`` and partition directories on a
single node, tables shared by a cluster): after each change the view is brought to the
store's snapshot. A change a request asks for (CreateTopics, CreatePartitions, AlterConfigs
of a topic, DeleteTopics) is awaited, so a shared store writes it without holding up the
event loop, and so is an auto-created or internal topic (:meth:`TopicManager.ensure`); only a
single node's ``__share_group_state`` is created blocking (:meth:`TopicManager.create`).
A lookup answers from the view, as Kafka's brokers answer from their
metadata cache (a cluster's engine refreshes it when another node changes the catalog);
a request naming a topic the view lacks (Metadata, the topic admin requests, OffsetCommit
and OffsetFetch by id) awaits :meth:`TopicManager.resolve` first.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.dynamic_config import DynamicConfigs
from samsa.broker.partition import Partition
from samsa.broker.storage import TopicRecord, TopicStore
from samsa.log import LogConfig

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC, SHARE_STATE_TOPIC})
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
    """Creates, grows, alters and deletes topics (validated here, kept by ``store``)."""

    def __init__(self, config: BrokerConfig, store: TopicStore,
                 dynamic: DynamicConfigs | None = None) -> None:
        self.config = config
        self.store = store
        self.dynamic = dynamic if dynamic is not None else DynamicConfigs(config)
        self.data_dir = config.data_dir
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._now_ms = 0
        #: moves whenever a topic appears, disappears or grows (what the group
        #: coordinator's topic snapshot depends on: checked before every consumer heartbeat)
        self.version = 0

    # -- lookup -------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        """From the view (never waits for the store: see :meth:`catch_up`)."""
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
        if name == TRANSACTION_TOPIC:
            merged["cleanup.policy"] = "compact"
            merged["segment.bytes"] = str(self.config["transaction.state.log.segment.bytes"])
        merged.update(overrides)
        return LogConfig.from_mapping(merged)

    # -- lifecycle ----------------------------------------------------------------------
    def load(self, now_ms: int) -> None:
        """Open every stored topic (a local engine recovers their logs)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.dynamic.load()
        self._now_ms = now_ms
        self.store.load(now_ms)
        self.refresh()

    def refresh(self) -> bool:
        """Bring the view to the store's snapshot; True if anything changed."""
        return self._take(self.store.snapshot())

    async def catch_up(self) -> bool:
        """:meth:`refresh` reading the store without holding up the event loop (a topic
        asked for that the view lacks: another node may have just created it)."""
        return self._take(await self.store.fetch())

    async def resolve(self, names: Iterable[str | None] = (),
                      ids: Iterable[uuid.UUID | None] = (),
                      hold: Callable[[], None] | None = None) -> None:
        """:meth:`catch_up` if any of ``names`` or ``ids`` is missing from the view (a
        request naming a topic another node may have just created); ``hold`` is called
        first then (the request's :meth:`~samsa.broker.context.RequestContext.hold`: its
        connection's later requests wait for it), and the call does not wait otherwise."""
        if any(n is not None and n not in self._topics for n in names) or any(
                i is not None and i not in self._by_id for i in ids):
            if hold is not None:
                hold()
            await self.catch_up()

    def _take(self, snapshot: list[TopicRecord] | None) -> bool:
        if snapshot is None:
            return False
        seen = set()
        for rec in snapshot:
            seen.add(rec.name)
            topic = self._topics.get(rec.name)
            if topic is not None and topic.topic_id != rec.topic_id:
                self._forget(topic)  # deleted and re-created meanwhile
                topic = None
            if topic is None:
                topic = Topic(rec.name, rec.topic_id, dict(rec.overrides))
                self._add(topic)
            elif topic.overrides != rec.overrides:
                topic.overrides = dict(rec.overrides)
                config = self.log_config(topic.overrides, rec.name)
                for part in topic.partitions:
                    part.log.reconfigure(config)
            if len(topic.partitions) < rec.partitions:
                config = self.log_config(topic.overrides, rec.name)
                for index in range(len(topic.partitions), rec.partitions):
                    topic.partitions.append(self._open(rec.name, index, config))
                self.version += 1
        for name in [n for n in self._topics if n not in seen]:
            self._forget(self._topics[name])
        return True

    def create(self, name: str, num_partitions: int,
               overrides: Mapping[str, str] | None = None, *, now_ms: int) -> Topic:
        """Create a topic, blocking on a shared store: for a caller that cannot await (a
        single node's ``__share_group_state``: a cluster keeps share states in its engine);
        raises :class:`TopicError` with Kafka's error codes."""
        record = self._new_topic(name, num_partitions, overrides)
        created = self.store.create_now(record)
        self._now_ms = now_ms
        self.refresh()
        return self._created(record, created)

    async def ensure(self, name: str, num_partitions: int,
                     overrides: Mapping[str, str] | None = None, *, now_ms: int) -> Topic:
        """The topic ``name``, created by :meth:`create_topic` if the view lacks it (an
        auto-created or internal topic): another node or request creating it meanwhile is
        no error; raises :class:`TopicError` otherwise."""
        topic = self.get(name)
        if topic is not None:
            return topic
        try:
            return await self.create_topic(name, num_partitions, overrides, now_ms=now_ms)
        except TopicError as exc:
            topic = self.get(name)  # the view was brought to the store: the winner's topic
            if exc.error_code != ErrorCode.topic_already_exists or topic is None:
                raise
            return topic

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        overrides: Mapping[str, str] | None = None,
        *,
        now_ms: int,
        validate_only: bool = False,
    ) -> Topic:
        """:meth:`create` without holding up the event loop (CreateTopics, and through
        :meth:`ensure` auto-created and internal topics; with ``validate_only`` nothing is
        created)."""
        record = self._new_topic(name, num_partitions, overrides)
        if validate_only:
            return Topic(name, record.topic_id, dict(record.overrides))
        created = await self.store.create(record)
        self._now_ms = now_ms
        await self.catch_up()
        return self._created(record, created)

    def _new_topic(self, name: str, num_partitions: int,
                   overrides: Mapping[str, str] | None) -> TopicRecord:
        """The record of a new topic, validated; raises :class:`TopicError`."""
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
        return TopicRecord(name, uuid.uuid4(), overrides, num_partitions)

    def _created(self, record: TopicRecord, created: bool) -> Topic:
        """The topic ``record`` made, once the view was brought to the store."""
        topic = self._topics.get(record.name)
        if not created or topic is None or topic.topic_id != record.topic_id:
            raise TopicError(ErrorCode.topic_already_exists,
                             f"Topic '{record.name}' already exists.")
        return topic

    async def add_partitions(
        self, name: str, total: int, *, now_ms: int, validate_only: bool = False
    ) -> Topic:
        """Grow ``name`` to ``total`` partitions (CreatePartitions)."""
        topic = self.get(name)
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
        await self.store.add_partitions(name, current, total)
        self._now_ms = now_ms
        await self.catch_up()
        return topic

    async def alter(self, name: str, overrides: Mapping[str, str], *,
                    validate_only: bool = False) -> Topic:
        """Replace a topic's config overrides (AlterConfigs): validated, persisted and
        applied to its partitions at once; raises :class:`TopicError` (INVALID_CONFIG,
        UNKNOWN_TOPIC_OR_PARTITION) and then changes nothing."""
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
        await self.store.alter(name, overrides)
        if self._topics.get(name) is topic:  # not deleted meanwhile
            topic.overrides = overrides
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

    async def delete(self, name: str) -> Topic:
        """Delete a topic and its data; UNKNOWN_TOPIC_OR_PARTITION if the view lacks it, or
        if another node or request deleted it first (as Kafka answers the second of two
        deletions)."""
        topic = self.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        if topic.internal:
            raise TopicError(ErrorCode.invalid_topic_exception,
                             f"Internal topic {name} cannot be deleted.")
        deleted = await self.store.delete(name, topic.topic_id)
        if self._topics.get(name) is topic:  # not already forgotten by a refresh meanwhile
            self._forget(topic)
        await self.catch_up()
        if not deleted:
            raise TopicError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        return topic

    def close(self) -> None:
        for topic in self._topics.values():
            for part in topic.partitions:
                part.log.close()

    # -- internals ----------------------------------------------------------------------
    def _open(self, name: str, index: int, config: LogConfig) -> Partition:
        part: Partition

        def wake() -> None:
            part.notify()

        part = Partition(name, index, self.store.open_partition(
            name, index, config, self._now_ms, wake))
        return part

    def _add(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self.version += 1

    def _forget(self, topic: Topic) -> None:
        self.version += 1
        if self._topics.get(topic.name) is topic:
            del self._topics[topic.name]
        self._by_id.pop(topic.topic_id, None)
        for part in topic.partitions:
            part.log.close()
            part.notify()
