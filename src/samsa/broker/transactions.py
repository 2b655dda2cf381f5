"""The transaction coordinator's asyncio edge (the pure core is :mod:`samsa.transactions`).

Owns ``__transaction_state`` (compacted, ``transaction.state.log.num.partitions``
partitions): created on the first transactional request, as Kafka does, and loaded on start
when it exists, each partition replayed into its shard. Runs the core's keyed timers on the
loop (the group edge's :class:`~samsa.broker.groups.LoopTimer`) and turns each result into
writes:

* the result's records are appended to their ``__transaction_state`` partitions (one batch
  per partition), and its replies go out once they are durable;
* then its :class:`~samsa.transactions.coordinator.Markers` are written: a control batch
  (:func:`~samsa.protocol.records.encode_marker`) to every partition of the transaction
  through its partition store; a marker appended to a ``__consumer_offsets`` partition
  commits or drops the offsets staged there (:meth:`GroupTxnOffsets.marker_written`, as a
  reload replaying the marker would); once every marker is durable the core completes the
  transaction. A marker that cannot be written is retried
  while this node runs; a shard reloaded later writes the markers of every decided
  transaction again (a second marker for a closed transaction changes nothing).

An append that fails unloads the shard and loads it again from its log; the lost
result's requests get COORDINATOR_NOT_AVAILABLE (the clients retry), as on the group side.
Single node only: a cluster node does not serve transactions yet (see docs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from samsa.broker.clock import now_ms
from samsa.broker.groups import LoopTimer
from samsa.broker.topics import OFFSETS_TOPIC, TRANSACTION_TOPIC, Topic, TopicError
from samsa.coordinator.timers import TimerKey
from samsa.protocol.records import ProducerRecordData, encode_batch, encode_marker, log_entries
from samsa.transactions.coordinator import (
    Markers,
    TxnAnswer,
    TxnConfig,
    TxnCoordinator,
    TxnEvent,
    TxnResult,
)
from samsa.transactions.records import TxnKey, TxnValue, deserialize, serialize

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.partition import Partition
    from samsa.broker.storage import Leadership
    from samsa.broker.topics import TopicManager

log = logging.getLogger("samsa.transactions")

MARKER_RETRY_S = 0.2


class GroupTxnOffsets(Protocol):
    """The group side of a transaction's end (:class:`samsa.broker.txn_offsets.TxnOffsets`)."""

    def marker_written(self, partition: int, producer_id: int, epoch: int,
                       commit: bool) -> None:
        """A marker was appended to ``__consumer_offsets`` ``partition``: the producer's
        offsets staged there are committed or dropped."""


class Broker(Protocol):
    config: BrokerConfig
    topics: TopicManager
    leadership: Leadership


class TxnRuntime:
    """Runs the pure :class:`TxnCoordinator` against the broker's logs and loop."""

    def __init__(self, broker: Broker, groups: GroupTxnOffsets | None = None) -> None:
        self.broker = broker
        self.groups = groups
        self.timer = LoopTimer(self.fire)
        config = broker.config
        self.config = TxnConfig.from_properties({
            name: config[name] for name in ("transaction.state.log.num.partitions",
                                            "transaction.max.timeout.ms",
                                            "transactional.id.expiration.ms")})
        self.coordinator: TxnCoordinator | None = None
        self.topic: Topic | None = None
        self._starting: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Load ``__transaction_state`` if it exists (a cluster node serves none)."""
        if self.broker.leadership.leases:
            return
        topic = self.broker.topics.get(TRANSACTION_TOPIC)
        if topic is not None:
            await self._load(topic)

    def ensure_started(self) -> int:
        """NONE when the coordinator runs; else begin creating its topic (the first
        transactional request) and answer COORDINATOR_NOT_AVAILABLE meanwhile."""
        if self.coordinator is not None:
            return ErrorCode.none
        if self.broker.leadership.leases:
            return ErrorCode.coordinator_not_available
        if self._starting is None:
            self._starting = asyncio.create_task(self._create())
        return ErrorCode.coordinator_not_available

    async def _create(self) -> None:
        topics = self.broker.topics
        topic = topics.get(TRANSACTION_TOPIC)
        if topic is None:
            try:
                topic = topics.create(TRANSACTION_TOPIC, self.config.num_partitions,
                                      now_ms=now_ms())
            except TopicError:
                log.exception("creating %s failed", TRANSACTION_TOPIC)
                self._starting = None
                return
        await self._load(topic)

    async def _load(self, topic: Topic) -> None:
        # Like Kafka, the existing topic's partition count decides where ids live.
        config = replace(self.config, num_partitions=len(topic.partitions))
        coordinator = TxnCoordinator(config, self.timer)
        self.topic = topic
        results = []
        for part in topic.partitions:
            coordinator.begin_load(part.index)
            batches = await part.log.read_all()
            results.append(coordinator.finish_load(
                part.index, _records(batches, part.log.log_start_offset)))
        self.coordinator = coordinator
        for result in results:
            self._apply(result)

    async def stop(self) -> None:
        self.timer.close()
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- requests -----------------------------------------------------------------------
    def coordinator_error(self, transactional_id: str) -> int:
        error = self.ensure_started()
        if error or self.coordinator is None:
            return error
        return self.coordinator.coordinator_error(transactional_id)

    def transactions(self) -> list[tuple[str, TxnValue]]:
        """Every transactional id this node coordinates (none before the topic exists)."""
        return [] if self.coordinator is None else self.coordinator.transactions()

    def describe(self, transactional_id: str) -> tuple[int, TxnValue | None]:
        error = self.ensure_started()
        if error or self.coordinator is None:
            return error, None
        return self.coordinator.describe(transactional_id)

    async def call(self, event: TxnEvent) -> TxnAnswer:
        """Handle one request; its answer once its records are durable."""
        error = self.ensure_started()
        if error or self.coordinator is None:
            return TxnAnswer(error)
        fut: asyncio.Future[TxnAnswer] = asyncio.get_running_loop().create_future()
        self._apply(self.coordinator.handle(event, now_ms(), reply_to=fut))
        return await fut

    def fire(self, key: TimerKey) -> None:
        if self.coordinator is not None:
            self._apply(self.coordinator.fire(key, now_ms()))

    # -- writing ------------------------------------------------------------------------
    def _apply(self, result: TxnResult) -> None:
        task = asyncio.create_task(self._run(result))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, result: TxnResult) -> None:
        assert self.topic is not None
        parts = self.topic.partitions
        try:
            synced = []
            by_partition: dict[int, list[tuple[TxnKey, TxnValue | None]]] = {}
            for r in result.records:
                by_partition.setdefault(r.partition, []).append((r.key, r.value))
            now = now_ms()
            for index, records in by_partition.items():
                part = parts[index]
                batch = encode_batch([ProducerRecordData(now, *serialize(k, v), ())
                                      for k, v in records])
                info = part.log.append(batch, now)
                part.notify()
                synced.append(part.log.wait_durable(info.last_offset + 1))
            await asyncio.gather(*synced)
        except Exception:
            log.exception("writing transaction records failed; reloading the shards")
            for reply in result.replies:
                _answer(reply.token, TxnAnswer(ErrorCode.coordinator_not_available))
            if self.coordinator is not None and self.topic is not None:
                for index in {r.partition for r in result.records}:
                    self._reload(index)
            return
        for reply in result.replies:
            _answer(reply.token, reply.answer)
        for markers in result.markers:
            await self._write_markers(markers)

    def _reload(self, index: int) -> None:
        assert self.coordinator is not None and self.topic is not None
        coordinator, part = self.coordinator, self.topic.partitions[index]

        async def load() -> None:
            shard = coordinator.begin_load(index)
            batches = await part.log.read_all()
            if coordinator.shards.get(index) is shard:
                self._apply(coordinator.finish_load(
                    index, _records(batches, part.log.log_start_offset)))
        task = asyncio.create_task(load())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_markers(self, markers: Markers) -> None:
        """Write every marker of a decided transaction (retrying), then complete it."""
        topics = self.broker.topics
        waits = []
        for topic, index in markers.partitions:
            while True:
                part = topics.partition(topic, index)
                if part is None:  # deleted meanwhile: nothing to mark
                    break
                try:
                    end = append_marker(part, markers.commit, markers.producer_id,
                                        markers.producer_epoch, 0)
                    if topic == OFFSETS_TOPIC and self.groups is not None:
                        self.groups.marker_written(index, markers.producer_id,
                                                   markers.producer_epoch, markers.commit)
                    waits.append(part.log.wait_durable(end))
                    break
                except Exception:
                    log.exception("writing a transaction marker to %s-%d failed; retrying",
                                  topic, index)
                    await asyncio.sleep(MARKER_RETRY_S)
        try:
            await asyncio.gather(*waits)
        except OSError:
            log.exception("transaction markers did not become durable")
            return  # the transaction stays decided: a reload writes its markers again
        if self.coordinator is not None:
            self._apply(self.coordinator.markers_written(markers, now_ms()))


def append_marker(part: Partition, commit: bool, producer_id: int, epoch: int,
                  coordinator_epoch: int) -> int:
    """Append one transaction marker to ``part`` (woken fetches see it); the offset after
    it, to wait for its durability. Also WriteTxnMarkers' (KIP-664's abort)."""
    now = now_ms()
    info = part.log.append(encode_marker(commit, producer_id, epoch, coordinator_epoch, now),
                           now)
    part.notify()
    return info.last_offset + 1


def fenced_code(code: int, version: int, fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as a client of ``version`` knows it: INVALID_PRODUCER_EPOCH before
    the API's ``fenced_version`` (KIP-588)."""
    if code == ErrorCode.producer_fenced and version < fenced_version:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode(code)


def _answer(token: object, answer: TxnAnswer) -> None:
    if isinstance(token, asyncio.Future) and not token.done():
        token.set_result(answer)


def _records(batches: list[bytes], start: int) -> Iterator[tuple[TxnKey, TxnValue | None]]:
    """The typed records of a ``__transaction_state`` partition, in order, from ``start``."""
    for entry in log_entries(batches, start):
        if entry.key is not None:
            record = deserialize(entry.key, entry.value)
            if record is not None:
                yield record
