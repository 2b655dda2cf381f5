"""The transaction coordinator's asyncio edge (the pure core is :mod:`samsa.transactions`).

Owns ``__transaction_state`` (compacted, ``transaction.state.log.num.partitions``
partitions): created on the first transactional request, as Kafka does. Its shards run on
the group coordinator's shard runtime (:class:`~samsa.coordinator.runtime.ShardRuntime`:
loading, writing, and reloading after a failed append are the same rules): a single node
loads every shard when the topic exists; a cluster node loads the shards whose lease it
takes (:meth:`TxnRuntime.gain`, from the cluster's lease loop) and unloads those it loses.
The core's keyed timers run on the loop (the group edge's
:class:`~samsa.broker.groups.LoopTimer`). Each result:

* its records are appended to their ``__transaction_state`` partitions (one batch per
  partition), and its replies go out once they are durable;
* then its :class:`~samsa.transactions.coordinator.Markers` are written: a control batch
  (:func:`~samsa.protocol.records.encode_marker`, carrying the shard's coordinator epoch)
  to every partition of the transaction. A partition this node leads gets it through its
  partition store (:func:`write_marker`: on ``__consumer_offsets`` the offsets staged there
  are committed or dropped, as a reload replaying the marker would); a partition another
  cluster node leads gets it from that node: the markers are *forwarded* through the
  engine (:class:`MarkerForwarder`, the cluster's durable marker mailbox, see
  docs/transactions-cluster.md). Once every marker is durable the core completes the
  transaction. A marker that cannot be written is retried while this node holds the
  shard; a shard loaded later writes the markers of every decided transaction again (a
  second marker for a closed transaction changes nothing).

KIP-890's implicit adds (Produce v12, TxnOffsetCommit v5) come in through
:meth:`TxnRuntime.add_implicitly`, and its part 1 verifications (a transactions-v1
producer's first batch on a partition) through :meth:`TxnRuntime.verify`; a cluster node
that does not hold the id's shard forwards them to the node that does
(:class:`AddForwarder`, the same database mailboxes). Forwarding through the database
rather than sending AddPartitionsToTxn v4 over the wire: samsa's nodes talk only through
PostgreSQL (no node-to-node connections, listeners or credentials), and the mailbox
already answers a coordinator's question under its shard lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kio.schema.errors import ErrorCode

from samsa.broker.clock import now_ms
from samsa.broker.groups import LoopTimer
from samsa.broker.parking import wait_event
from samsa.broker.topics import OFFSETS_TOPIC, TRANSACTION_TOPIC, Topic
from samsa.coordinator.runtime import Load, ShardRuntime, partitions_of
from samsa.coordinator.timers import TimerKey
from samsa.protocol.records import ProducerRecordData, encode_batch, encode_marker, log_entries
from samsa.transactions.coordinator import (
    AddPartitions,
    Markers,
    TxnAnswer,
    TxnConfig,
    TxnCoordinator,
    TxnEvent,
    TxnRecord,
    TxnReply,
    TxnResult,
    TxnShard,
)
from samsa.transactions.records import TxnKey, TxnValue, deserialize, serialize

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.partition import Partition
    from samsa.broker.storage import Leadership
    from samsa.broker.topics import TopicManager

log = logging.getLogger("samsa.transactions")

MARKER_RETRY_S = 0.2
CONCURRENT_WAIT_S = 1.0
"""How long a request refused CONCURRENT_TRANSACTIONS waits for the markers in flight."""


class GroupTxnOffsets(Protocol):
    """The group side of a transaction's end (:class:`samsa.broker.txn_offsets.TxnOffsets`)."""

    def marker_written(self, partition: int, producer_id: int, epoch: int,
                       commit: bool) -> None:
        """A marker was appended to ``__consumer_offsets`` ``partition``: the producer's
        offsets staged there are committed or dropped."""


@runtime_checkable
class MarkerForwarder(Protocol):
    """How a cluster node has markers written to partitions other nodes lead (the
    engine's :class:`~samsa.broker.storage.Leadership` when it provides it)."""

    def forward_markers(self, markers: Markers, partitions: Sequence[tuple[str, int]],
                        shard: int) -> Awaitable[None]:
        """Return once the owners of ``partitions`` made ``markers`` durable there (this
        node coordinates them from ``__transaction_state`` partition ``shard``); raises
        when they could not be forwarded."""


@runtime_checkable
class AddForwarder(Protocol):
    """How a cluster node has the node holding a transactional id's shard answer an
    implicit add (the engine's :class:`~samsa.broker.storage.Leadership` when it provides
    it)."""

    def forward_add(self, event: AddPartitions, shard: int) -> Awaitable[int]:
        """The error code the holder of ``__transaction_state`` partition ``shard``
        answered ``event``."""


class Broker(Protocol):
    config: BrokerConfig
    topics: TopicManager
    leadership: Leadership


def write_marker(topics: TopicManager, groups: GroupTxnOffsets | None, topic: str, index: int,
                 markers: Markers) -> Awaitable[None] | None:
    """Append ``markers``' control batch to ``topic``-``index`` (led by this node); what to
    wait for it to be durable, None when the partition is gone. Raises the store's error
    (NOT_LEADER_OR_FOLLOWER when this node does not lead it)."""
    part = topics.partition(topic, index)
    if part is None:
        return None
    end = append_marker(part, markers.commit, markers.producer_id, markers.producer_epoch,
                        markers.coordinator_epoch)
    if topic == OFFSETS_TOPIC and groups is not None:
        groups.marker_written(index, markers.producer_id, markers.producer_epoch,
                              markers.commit)
    return part.log.wait_durable(end)


class TxnRuntime:
    """Runs the pure :class:`TxnCoordinator` on the shard runtime, the broker's logs and
    loop."""

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
        self.shards: ShardRuntime[TxnShard, TxnResult] | None = None
        self.topic: Topic | None = None
        self._starting: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: (transactional id, producer id, epoch) of the markers being written
        self._writing: set[tuple[str, int, int]] = set()
        #: transactional id -> set once the markers being written for it are
        self._ending: dict[str, asyncio.Event] = {}

    @property
    def clustered(self) -> bool:
        return self.broker.leadership.leases

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Open ``__transaction_state`` if it exists; a single node loads every shard (a
        cluster node those it is given: :meth:`gain`)."""
        topic = self.broker.topics.get(TRANSACTION_TOPIC)
        if topic is not None:
            await self._open(topic)

    def ensure_started(self) -> int:
        """NONE when the coordinator runs; else begin creating its topic (the first
        transactional request) and answer COORDINATOR_NOT_AVAILABLE meanwhile."""
        if self.coordinator is not None:
            return ErrorCode.none
        if self._starting is None:
            self._starting = asyncio.create_task(self._create())
        return ErrorCode.coordinator_not_available

    async def _create(self) -> None:
        try:
            topic = await self.broker.topics.ensure(TRANSACTION_TOPIC, self.config.num_partitions,
                                                    now_ms=now_ms())
        except Exception:  # the next transactional request tries again
            log.exception("creating %s failed", TRANSACTION_TOPIC)
            self._starting = None
            return
        await self._open(topic)

    def _opened(self) -> ShardRuntime[TxnShard, TxnResult] | None:
        """The shard runtime, opened on the topic once it exists (a cluster node may be
        given a shard of a topic another node created)."""
        if self.shards is None:
            topic = self.broker.topics.get(TRANSACTION_TOPIC)
            if topic is not None:
                self._setup(topic)
        return self.shards

    def _setup(self, topic: Topic) -> None:
        # Like Kafka, the existing topic's partition count decides where ids live.
        config = replace(self.config, num_partitions=len(topic.partitions))
        self.coordinator = TxnCoordinator(config, self.timer)
        self.topic = topic
        self.shards = ShardRuntime(self.coordinator, _StateWriter(topic), _FutureReplies(),
                                   self.broker.config.node_id)

    async def _open(self, topic: Topic) -> None:
        if self.shards is None:
            self._setup(topic)
        shards = self.shards
        assert shards is not None
        if self.clustered:
            return  # the cluster gives this node its shards (gain)
        for part in topic.partitions:
            await self._load(shards.gain(part.index, now_ms()))

    async def stop(self) -> None:
        self.timer.close()
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- shards moving between cluster nodes --------------------------------------------
    async def gain(self, index: int, previous_node: int | None = None,
                   lease_epoch: int | None = None) -> None:
        """This node now holds shard ``index`` (lease ``lease_epoch``): load it (its
        transactional ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), then finish the
        decided transactions it finds."""
        shards = self._opened()
        if shards is not None:
            await self._load(shards.gain(index, now_ms(), previous_node, lease_epoch))

    def lose(self, index: int) -> None:
        """This node no longer holds shard ``index``: unload it."""
        if self.shards is not None:
            self.shards.lose(index)

    async def write_forwarded(self, topic: str, index: int, markers: Markers) -> None:
        """Write a marker another node's coordinator forwarded to ``topic``-``index``
        (which this node leads); returns once it is durable."""
        wait = write_marker(self.broker.topics, self.groups, topic, index, markers)
        if wait is not None:
            await wait

    async def _load(self, load: Load[TxnShard]) -> None:
        """Read the partition once every append made before is durable, replay it into the
        shard and write what the activated shard asks (its markers); a failed read is
        retried while this node holds the partition."""
        shards, topic = self.shards, self.topic
        assert shards is not None and topic is not None
        store = topic.partitions[load.partition].log
        loading, backoff = time.perf_counter(), 0.05
        while True:
            if not shards.current(load):
                return
            try:
                batches = await store.read_all()
                break
            except Exception:
                if store.epoch != load.epoch:
                    shards.lose(load.partition)
                    return
                log.exception("loading transaction shard %d failed; retrying", load.partition)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        result = shards.finish(load, _records(batches, store.log_start_offset), now_ms())
        if result is not None:
            self._apply(result)
            log.log(logging.INFO if self.clustered else logging.DEBUG,
                    "loaded transaction shard %d in %.0f ms", load.partition,
                    (time.perf_counter() - loading) * 1000)

    # -- requests -----------------------------------------------------------------------
    def coordinator_error(self, transactional_id: str) -> int:
        error = self.ensure_started()
        if error or self.coordinator is None:
            return error
        return self.coordinator.coordinator_error(transactional_id)

    def partition_for(self, transactional_id: str) -> int | None:
        """The ``__transaction_state`` partition of ``transactional_id`` (None before the
        topic exists: its creation begins)."""
        if self.ensure_started() or self.coordinator is None:
            return None
        return self.coordinator.partition_for(transactional_id)

    def transactions(self) -> list[tuple[str, TxnValue]]:
        """Every transactional id this node coordinates (none before the topic exists)."""
        return [] if self.coordinator is None else self.coordinator.transactions()

    def describe(self, transactional_id: str) -> tuple[int, TxnValue | None]:
        error = self.ensure_started()
        if error or self.coordinator is None:
            return error, None
        return self.coordinator.describe(transactional_id)

    async def call(self, event: TxnEvent) -> TxnAnswer:
        """Handle one request; its answer once its records are durable. A request refused
        CONCURRENT_TRANSACTIONS while this node writes the markers of the id's previous
        transaction waits for them (up to :data:`CONCURRENT_WAIT_S`) and is handled again,
        instead of sending the client into its retry backoff: the answer is the one its
        retry would get."""
        answer = await self._call_once(event)
        ending = self._ending.get(event.transactional_id)
        if (answer.error_code == ErrorCode.concurrent_transactions and ending is not None
                and await wait_event(ending, CONCURRENT_WAIT_S)):
            answer = await self._call_once(event)
        return answer

    async def add_implicitly(self, event: AddPartitions) -> TxnAnswer:
        """KIP-890's implicit add (Produce v12, TxnOffsetCommit v5), asked by this node on
        the producer's behalf: on a cluster node that does not hold the id's shard it is
        forwarded to the node that does (:class:`AddForwarder`)."""
        answer = await self.call(event)
        forwarder = self._forwarder(answer)
        if forwarder is None:
            return answer
        try:
            return TxnAnswer(await forwarder.forward_add(event, self._shard(event)))
        except Exception:
            log.warning("forwarding an implicit add for %s failed", event.transactional_id,
                        exc_info=True)
            return TxnAnswer(ErrorCode.coordinator_not_available)

    async def verify(self, event: AddPartitions) -> TxnAnswer:
        """KIP-890 part 1: are ``event``'s partitions (``verify_only``) in the producer's
        open transaction? Asked by this node as their leader, before a transactions-v1
        producer's first batch opens a transaction there. A cluster node that does not
        hold the id's shard forwards it like an implicit add, one partition a question (a
        forwarded answer is one error code: TRANSACTION_ABORTABLE for a partition outside
        the transaction)."""
        answer = await self.call(event)
        forwarder = self._forwarder(answer)
        if forwarder is None:
            return answer
        shard = self._shard(event)
        try:
            codes = await asyncio.gather(*(forwarder.forward_add(
                replace(event, partitions=(tp,)), shard) for tp in event.partitions))
        except Exception:
            log.warning("forwarding a verification for %s failed", event.transactional_id,
                        exc_info=True)
            return TxnAnswer(ErrorCode.coordinator_not_available)
        outside = ErrorCode.transaction_abortable
        failed = [code for code in codes if code not in (ErrorCode.none, outside)]
        if failed:
            return TxnAnswer(failed[0])
        return TxnAnswer(ErrorCode.none, unverified=tuple(
            tp for tp, code in zip(event.partitions, codes, strict=True) if code == outside))

    def _forwarder(self, answer: TxnAnswer) -> AddForwarder | None:
        """Where to forward a question this node answered NOT_COORDINATOR (a cluster node
        not holding the id's shard); None: ``answer`` stands."""
        forwarder = self.broker.leadership
        if (answer.error_code != ErrorCode.not_coordinator or self.coordinator is None
                or not isinstance(forwarder, AddForwarder)):
            return None
        return forwarder

    def _shard(self, event: AddPartitions) -> int:
        assert self.coordinator is not None
        return self.coordinator.partition_for(event.transactional_id)

    async def add_for_peer(self, event: AddPartitions) -> int:
        """An implicit add or a verification another cluster node forwarded: its error
        code (a verification: TRANSACTION_ABORTABLE when a partition is outside the
        transaction)."""
        answer = await self.call(event)
        if answer.error_code == ErrorCode.none and answer.unverified:
            return ErrorCode.transaction_abortable
        return answer.error_code

    async def _call_once(self, event: TxnEvent) -> TxnAnswer:
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
        """Append the result's records (the shard runtime's rules), then deliver its
        replies and write its markers once they are durable."""
        shards = self.shards
        assert shards is not None
        if not result.records:
            shards.deliver(result)
            self._spawn_markers(result)
            return
        try:
            synced = shards.write(result, now_ms())
        except Exception:
            log.exception("appending transaction records failed; reloading the shards")
            self._failed(result)
            return
        self._spawn(self._when_durable(synced, result))

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            await coro
        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _when_durable(self, synced: list[tuple[int, int]], result: TxnResult) -> None:
        assert self.topic is not None and self.shards is not None
        parts = self.topic.partitions
        try:
            await asyncio.gather(*(parts[p].log.wait_durable(end) for p, end in synced))
        except OSError:
            log.exception("transaction records did not become durable; reloading the shards")
            self._failed(result)
            return
        self.shards.deliver(result)
        self._spawn_markers(result)

    def _failed(self, result: TxnResult) -> None:
        assert self.shards is not None
        for load in self.shards.failed(partitions_of(result), result, now_ms()):
            self._spawn(self._load(load))

    def _spawn_markers(self, result: TxnResult) -> None:
        for markers in result.markers:
            key = (markers.transactional_id, markers.producer_id, markers.producer_epoch)
            if key not in self._writing:  # a reload asks again for markers in flight
                self._writing.add(key)
                self._ending.setdefault(markers.transactional_id, asyncio.Event())
                self._spawn(self._write_markers(markers, key))

    def _holds(self, markers: Markers) -> bool:
        """This node still coordinates ``markers``' transaction, from the load that decided
        them (a marker of a shard this node lost must not close the producer's next
        transaction)."""
        if self.coordinator is None:
            return False
        shard = self.coordinator.shards.get(
            self.coordinator.partition_for(markers.transactional_id))
        return (shard is not None and shard.loaded
                and shard.coordinator_epoch == markers.coordinator_epoch)

    async def _write_markers(self, markers: Markers, key: tuple[str, int, int]) -> None:
        """Write every marker of a decided transaction (retrying while this node holds
        the shard), then complete it."""
        try:
            pending = list(markers.partitions)
            while pending:
                if not self._holds(markers):
                    return  # the shard moved: its new coordinator finishes the transaction
                pending = await self._try_markers(markers, pending)
                if pending:
                    await asyncio.sleep(MARKER_RETRY_S)
            if self.coordinator is not None:
                self._apply(self.coordinator.markers_written(markers, now_ms()))
        finally:
            self._writing.discard(key)
            ending = self._ending.pop(markers.transactional_id, None)
            if ending is not None:  # the transaction completed (or this node let it go)
                ending.set()

    async def _try_markers(self, markers: Markers, partitions: list[tuple[str, int]]
                           ) -> list[tuple[str, int]]:
        """One attempt at ``partitions``: this node's are appended, the others forwarded
        (on a cluster); the partitions still to do."""
        topics, failed = self.broker.topics, []
        local: list[tuple[tuple[str, int], Awaitable[None]]] = []
        remote = []
        for topic, index in partitions:
            part = topics.partition(topic, index)
            if part is None:
                continue  # deleted meanwhile: nothing to mark
            if part.log.epoch is None and self.clustered:
                remote.append((topic, index))
                continue
            try:
                wait = write_marker(topics, self.groups, topic, index, markers)
            except Exception:
                log.warning("writing a transaction marker to %s-%d failed; retrying", topic,
                            index, exc_info=True)
                failed.append((topic, index))
                continue
            if wait is not None:
                local.append(((topic, index), wait))
        forwarder = self.broker.leadership
        waits: list[Awaitable[None]] = [w for _, w in local]
        if remote and isinstance(forwarder, MarkerForwarder) and self.coordinator is not None:
            shard = self.coordinator.partition_for(markers.transactional_id)
            waits.append(forwarder.forward_markers(markers, remote, shard))
        elif remote:
            failed.extend(remote)
        outcomes = await asyncio.gather(*waits, return_exceptions=True)
        for (where, _), outcome in zip(local, outcomes, strict=False):
            if isinstance(outcome, BaseException):
                log.warning("a transaction marker on %s-%d did not become durable: %s",
                            *where, outcome)
                failed.append(where)
        if remote and len(outcomes) > len(local) and isinstance(outcomes[-1], BaseException):
            log.warning("forwarding transaction markers failed: %s", outcomes[-1])
            failed.extend(remote)
        return failed


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


class _StateWriter:
    """The shard runtime's :class:`~samsa.coordinator.runtime.ShardWriter`: the partition
    stores of ``__transaction_state``."""

    def __init__(self, topic: Topic) -> None:
        self.topic = topic

    def append(self, partition: int, records: Sequence[TxnRecord], now_ms: int) -> int:
        part = self.topic.partitions[partition]
        batch = encode_batch([ProducerRecordData(now_ms, *serialize(r.key, r.value), ())
                              for r in records])
        info = part.log.append(batch, now_ms)
        part.notify()
        return info.last_offset + 1

    def epoch(self, partition: int) -> int | None:
        return self.topic.partitions[partition].log.epoch


class _FutureReplies:
    """Answers to requests waiting on futures (:meth:`TxnRuntime.call`)."""

    def deliver(self, reply: TxnReply) -> None:
        _answer(reply.token, reply.answer)

    def fail(self, reply: TxnReply) -> None:
        _answer(reply.token, TxnAnswer(ErrorCode.coordinator_not_available))


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
