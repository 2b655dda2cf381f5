"""The group coordinator's asyncio edge.

Owns the ``__consumer_offsets`` topic (created on first start, compacted, one partition per
coordinator shard), replays each partition into its shard on start, runs the coordinator's
keyed timers on the event loop and turns every coordinator result into log appends and
replies:

* a request's event goes to :meth:`GroupRuntime.call`, which hands the coordinator a future
  as reply token and awaits it (a parked JoinGroup/SyncGroup is answered by a later result);
* loading, writing and failure handling are the shard runtime's rules
  (:class:`~samsa.coordinator.runtime.ShardRuntime`), run here against the engine's
  partition stores (:mod:`samsa.broker.storage`): the result's records are appended
  synchronously (one batch per shard), then the replies wait until they are durable (group
  commit with produce's acks=all writers);
* the result's jobs (target assignments, regex resolutions) start once its records are
  appended (:mod:`samsa.broker.group_jobs`: inline ones at once, offloaded ones in worker
  processes); each outcome comes back to the loop as ``coordinator.complete``, a result
  like any other. The jobs of a result whose append failed are dropped;
* if an append or its durability fails (a storage error), the touched shards are reloaded
  from their logs (requests still parked there get NOT_COORDINATOR) and every request the
  lost result answered gets COORDINATOR_NOT_AVAILABLE; clients rediscover and rejoin. That
  is the only recovery story: nothing is snapshotted or reverted (a reloaded shard asks for
  the jobs it still needs, and ignores the outcomes of those it asked for before). One
  loader serves every load (start-up of a single node, a shard the cluster hands this node
  through :meth:`GroupRuntime.gain`, a reload): it reads the partition once every append
  made before is durable, and retries a failed read while the node holds the partition;
  meanwhile the shard answers COORDINATOR_LOAD_IN_PROGRESS, never "group not found";
* before a ConsumerGroupHeartbeat is answered GROUP_ID_NOT_FOUND (fatal for the member),
  the node confirms it still holds the shard (:meth:`Leadership.confirm
  <samsa.broker.storage.Leadership.confirm>`): a cluster node that lost it (paused past
  its TTL, not ticked since) answers NOT_COORDINATOR and drops the shard.

Offsets expiry is the coordinator's own keyed timer (``offsets.retention.check.interval.ms``).

KIP-848 consumer groups read topic metadata (ids, names, partition counts, racks) from a
:class:`TopicsSnapshot` the edge hands the coordinator before loading and again whenever the
topics differ from the last snapshot, checked before each consumer-protocol request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from itertools import groupby
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from samsa.broker.clock import now_ms
from samsa.broker.group_jobs import JobRunner
from samsa.broker.topics import OFFSETS_TOPIC, Topic
from samsa.coordinator import (
    Coordinator,
    CoordinatorConfig,
    Event,
    Heartbeat,
    Record,
    Result,
    TimerKey,
    error_response,
)
from samsa.coordinator.consumer.topics import TopicInfo, TopicsSnapshot
from samsa.coordinator.events import ConsumerGroupHeartbeat
from samsa.coordinator.history import LoadInfo
from samsa.coordinator.jobs import Job
from samsa.coordinator.records import RecordKey, RecordValue, deserialize, serialize
from samsa.coordinator.responses import Response
from samsa.coordinator.result import Reply
from samsa.coordinator.runtime import Load, ShardRuntime, must_confirm, partitions_of
from samsa.coordinator.shard import CoordinatorShard
from samsa.coordinator.share.records import ShareGroupMemberMetadataKey
from samsa.coordinator.txn_offsets import Replayer
from samsa.protocol.records import (
    CONTROL_COMMIT,
    ProducerRecordData,
    encode_batch,
    log_entries,
)

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.metrics import BrokerMetrics
    from samsa.broker.storage import Leadership
    from samsa.broker.topics import TopicManager


class Broker(Protocol):
    """What the group runtime uses of its broker."""

    config: BrokerConfig
    topics: TopicManager
    leadership: Leadership
    metrics: BrokerMetrics

log = logging.getLogger("samsa.groups")

#: The broker settings the coordinator reads (``CoordinatorConfig.from_properties`` ignores
#: the rest): every ``group.*``, ``offsets.*`` and ``offset.*`` setting.
COORDINATOR_PREFIXES = ("group.", "offsets.", "offset.")


#: Requests that change no group's state or generation unless they write records (the
#: metrics need not look then: a consumer group's state is O(members) to compute): a
#: classic heartbeat only renews its member's session, and a consumer group is exactly
#: what its records replay to.
_QUIET = (Heartbeat, ConsumerGroupHeartbeat)


class StorageFailure(Exception):
    """The records behind a reply could not be written or fsynced."""


K = TypeVar("K", bound=Hashable)


class LoopTimer(Generic[K]):
    """The coordinator's :class:`~samsa.coordinator.Timer` on the asyncio loop (and the
    share partitions' lock timers: any hashable key).

    Deadlines are milliseconds of the coordinator's clock (``now``, the broker's wall
    clock); the loop sleeps by its own monotonic clock. The two round against each other, so
    a handle can fire a millisecond before its deadline in ``now`` terms: such an early fire
    re-arms for the rest instead of reaching the coordinator (which would ignore it), and no
    timer is ever lost that way.

    Every heartbeat pushes its member's session deadline later. Rather than cancelling and
    re-creating a loop timer each time (heap churn that cost a fifth of a heartbeat), a
    later deadline only updates a dict: the armed handle fires at the old deadline, sees
    the new one and re-arms once. An earlier deadline re-arms at once.
    """

    def __init__(self, fire: Callable[[K], None],
                 now: Callable[[], int] = now_ms) -> None:
        self._fire_key = fire
        self._now = now
        self._deadlines: dict[K, int] = {}
        self._handles: dict[K, tuple[asyncio.TimerHandle, int]] = {}

    def schedule(self, key: K, deadline_ms: int) -> None:
        self._deadlines[key] = deadline_ms
        armed = self._handles.get(key)
        if armed is not None:
            if armed[1] <= deadline_ms:
                return
            armed[0].cancel()
        self._arm(key, deadline_ms)

    def _arm(self, key: K, deadline_ms: int) -> None:
        delay = max(0.0, (deadline_ms - self._now()) / 1000)
        handle = asyncio.get_running_loop().call_later(delay, self._fire, key)
        self._handles[key] = (handle, deadline_ms)

    def cancel(self, key: K) -> None:
        self._deadlines.pop(key, None)
        armed = self._handles.pop(key, None)
        if armed is not None:
            armed[0].cancel()

    def _fire(self, key: K) -> None:
        self._handles.pop(key, None)
        deadline = self._deadlines.get(key)
        if deadline is None:
            return
        if deadline > self._now():  # pushed later meanwhile, or the loop woke up early
            self._arm(key, deadline)
            return
        del self._deadlines[key]
        self._fire_key(key)

    def close(self) -> None:
        for handle, _ in self._handles.values():
            handle.cancel()
        self._handles.clear()
        self._deadlines.clear()


class GroupRuntime:
    """Runs the pure :class:`Coordinator` against the broker's log and loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.timer: LoopTimer[TimerKey] = LoopTimer(self.fire)
        self.coordinator: Coordinator | None = None
        self.topic: Topic | None = None
        self.shards: ShardRuntime[CoordinatorShard, Result] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loads: set[asyncio.Task[None]] = set()
        self._topics_seen: tuple[tuple[object, int], ...] | None = None
        self._topics_version = -1
        self.jobs = JobRunner(int(broker.config["group.coordinator.background.threads"]),
                              self._job_done)
        #: called with (group, member) when a share group member is removed (the broker
        #: releases the records it holds: samsa.broker.shares)
        self.share_member_left: Callable[[str, str], None] | None = None

    @property
    def loads(self) -> dict[int, LoadInfo]:
        """Shard -> its last load (the console's coordinator health)."""
        return {} if self.shards is None else self.shards.loads

    @property
    def loaded_at(self) -> dict[int, int]:
        """Shard -> when its last load finished."""
        return {} if self.shards is None else self.shards.loaded_at

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Create or open ``__consumer_offsets``; a single node loads every shard now (a
        cluster node loads those it is given: :meth:`gain`)."""
        config = self.broker.config
        topics = self.broker.topics
        topic = await topics.ensure(OFFSETS_TOPIC, int(config["offsets.topic.num.partitions"]),
                                    now_ms=now_ms())
        self.topic = topic
        props: dict[str, object] = {s.name: value for s, value, _ in config.items()
                                    if s.name.startswith(COORDINATOR_PREFIXES)}
        # Like Kafka, the existing topic's partition count decides where groups live.
        props["offsets.topic.num.partitions"] = len(topic.partitions)
        coordinator_config = replace(CoordinatorConfig.from_properties(props),
                                     group_configs=topics.dynamic.group_overrides)
        self.coordinator = Coordinator(coordinator_config, self.timer)
        self.shards = ShardRuntime(self.coordinator, _OffsetsWriter(topic), _FutureReplies(),
                                   config.node_id)
        self.sync_topics()
        if self.broker.leadership.leases:
            return  # a cluster node loads the shards it is given (gain)
        started = now_ms()
        for part in topic.partitions:
            await self._load(self.shards.gain(part.index, now_ms()))
        log.info("loaded %d coordinator shards in %d ms", len(topic.partitions),
                 now_ms() - started)

    async def stop(self) -> None:
        self.timer.close()
        for task in self._loads:
            task.cancel()
        self.jobs.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- requests and timers --------------------------------------------------------------
    def _coord(self) -> Coordinator:
        assert self.coordinator is not None, "group runtime not started"
        return self.coordinator

    def _shards(self) -> ShardRuntime[CoordinatorShard, Result]:
        assert self.shards is not None, "group runtime not started"
        return self.shards

    async def call(self, event: Event) -> Response:
        """Handle one request event; returns its (possibly deferred) response."""
        self.sync_topics()
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        result = self._coord().handle(event, now_ms(), reply_to=fut)
        if result.records or not isinstance(event, _QUIET):
            self.broker.metrics.observe_group(self._coord(), getattr(event, "group_id", None))
        self._apply(result)
        try:
            response = await fut
        except StorageFailure:
            return error_response(event, int(ErrorCode.coordinator_not_available))
        if must_confirm(event, response) and not await self._still_coordinator(
                getattr(event, "group_id", "")):
            return error_response(event, int(ErrorCode.not_coordinator))
        return response

    async def _still_coordinator(self, group_id: str) -> bool:
        """Ask the engine whether this node still holds the group's shard before telling a
        member its group is gone (fatal for librdkafka and Java): a cluster node paused
        past its lease answers from what it held until it notices."""
        if self.topic is None:
            return True
        part = self.topic.partitions[self.partition_for(group_id)]
        return await self.broker.leadership.confirm(part.log)

    def fire(self, key: TimerKey) -> None:
        self.sync_topics()
        self._apply(self._coord().fire(key, now_ms()))
        self.broker.metrics.observe_group(self._coord(), key.group_id)

    def _job_done(self, job: Job, outcome: object) -> None:
        if self.coordinator is not None:
            self.sync_topics()
            self._apply(self.coordinator.complete(job, outcome, now_ms()))
            self.broker.metrics.observe_group(self.coordinator, job.group_id)

    def _start_jobs(self, result: Result) -> None:
        for job in sorted(result.jobs, key=lambda j: j.offload):  # inline ones first
            self.jobs.start(job)

    def _apply(self, result: Result) -> bool:
        """Append the result's records, then deliver its replies once they are durable;
        start its jobs once the records are appended."""
        shards = self._shards()
        if not result.records:
            shards.deliver(result)
            self._start_jobs(result)
            return True
        try:
            synced = shards.write(result, now_ms())
        except Exception:
            log.exception("appending group records failed; reloading the shards")
            self._failed(result)
            return False
        task = asyncio.create_task(self._deliver_when_durable(synced, result))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._start_jobs(result)
        if self.share_member_left is not None:
            for r in result.records:  # a share group member left or its session expired
                if isinstance(r.key, ShareGroupMemberMetadataKey) and r.value is None:
                    self.share_member_left(r.key.group, r.key.member_id)
        return True

    async def _deliver_when_durable(self, synced: list[tuple[int, int]],
                                    result: Result) -> None:
        assert self.topic is not None
        parts = self.topic.partitions
        try:
            await asyncio.gather(*(parts[p].log.wait_durable(end) for p, end in synced))
        except OSError:
            log.exception("group records did not become durable; reloading the shards")
            self._failed(result)
            return
        self._shards().deliver(result)

    def _failed(self, result: Result) -> None:
        """The result's records were lost: its shards reload (the runtime's rules)."""
        for load in self._shards().failed(partitions_of(result), result, now_ms()):
            self._spawn_load(load)

    def _spawn_load(self, load: Load[CoordinatorShard]) -> None:
        task = asyncio.create_task(self._load(load))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    def sync_topics(self) -> None:
        """Hand the coordinator a new :class:`TopicsSnapshot` if topics were created, deleted
        or grew since the last one (a single node: every replica is on this broker's rack).

        Called before anything the coordinator does that may compute a target assignment
        (a request, a timer, a job's completion, a shard's load) and whenever a cluster
        node reads changed topics: a node that takes a group over must not assign it from
        the topics it knew when it started (an empty target, never computed again)."""
        if self.coordinator is None or self.broker.topics.version == self._topics_version:
            return  # nothing appeared, disappeared or grew: O(1) per heartbeat
        self._topics_version = self.broker.topics.version
        topics = list(self.broker.topics)
        seen = tuple((t.topic_id, len(t.partitions)) for t in topics)
        if seen == self._topics_seen:
            return
        self._topics_seen = seen
        rack = self.broker.config.rack
        self._coord().update_metadata(TopicsSnapshot.of(
            TopicInfo(t.topic_id, t.name, len(t.partitions),
                      {p: frozenset({rack}) for p in range(len(t.partitions))} if rack else {})
            for t in topics), now_ms())

    # -- loading, and shards moving between cluster nodes ---------------------------------
    async def gain(self, index: int, previous_node: int | None = None,
                   lease_epoch: int | None = None) -> None:
        """This node now holds shard ``index`` (taken from ``previous_node`` under
        ``lease_epoch``): load it; its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        await self._load(self._shards().gain(index, now_ms(), previous_node, lease_epoch))

    async def _load(self, load: Load[CoordinatorShard]) -> None:
        """The one shard loader: read the partition (once every append made before is
        durable: an earlier result may still be on its way, and its answers promise its
        records) and replay it, unless the load was superseded meanwhile. A failed read is
        retried while this node holds the partition; a lost one drops the shard."""
        shards = self._shards()
        assert self.topic is not None
        index = load.partition
        store = self.topic.partitions[index].log
        loading = time.perf_counter()
        backoff = 0.05
        while True:
            if not shards.current(load):
                return  # lost or reloaded meanwhile
            try:
                batches = await store.read_all()
                break
            except Exception:
                if store.epoch != load.epoch:  # the partition was lost meanwhile
                    if self._coord().shards.get(index) is load.shard:
                        self.drop_shard(index)
                    return
                log.exception("loading coordinator shard %d failed; retrying", index)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        start = store.log_start_offset
        replayer = Replayer()
        self.sync_topics()  # a group waiting for a target computes it now, on these topics
        result = shards.finish(load, _records(batches, start, replayer), now_ms())
        if result is None:
            return  # lost or reloaded meanwhile
        replayer.restore(load.shard)
        self._apply(result)
        elapsed = time.perf_counter() - loading
        self.broker.metrics.shard_loaded(index, elapsed)
        log.log(logging.INFO if self.broker.leadership.leases else logging.DEBUG,
                "loaded coordinator shard %d in %.0f ms", index, elapsed * 1000)

    def drop_shard(self, index: int) -> None:
        """Unload shard ``index``: parked requests get NOT_COORDINATOR, its timers stop."""
        if self.coordinator is not None and index in self.coordinator.shards:
            self._shards().lose(index)
            log.info("unloaded coordinator shard %d", index)

    # -- lookups for FindCoordinator ------------------------------------------------------
    def coordinator_error(self, group_id: str) -> int:
        return self._coord().coordinator_error(group_id)

    def partition_for(self, group_id: str) -> int:
        return self._coord().partition_for(group_id)


class _OffsetsWriter:
    """The shard runtime's :class:`~samsa.coordinator.runtime.ShardWriter`: the partition
    stores of ``__consumer_offsets``."""

    def __init__(self, topic: Topic) -> None:
        self.topic = topic

    def append(self, partition: int, records: Sequence[Record], now_ms: int) -> int:
        """One batch per run of records of the same producer (a transactional offset's
        batch carries its producer id and epoch, as Kafka's coordinator writes it)."""
        part = self.topic.partitions[partition]
        batches = []
        for producer, run in groupby(records, key=lambda r: r.producer):
            data = [ProducerRecordData(now_ms, *serialize(r.key, r.value), ()) for r in run]
            batches.append(encode_batch(data) if producer is None else encode_batch(
                data, producer_id=producer[0], producer_epoch=producer[1], transactional=True))
        info = part.log.append(b"".join(batches), now_ms)
        part.notify()
        return info.last_offset + 1

    def epoch(self, partition: int) -> int | None:
        return self.topic.partitions[partition].log.epoch


class _FutureReplies:
    """Replies to requests waiting on futures (:meth:`GroupRuntime.call`)."""

    def deliver(self, reply: Reply) -> None:
        token = reply.token
        if isinstance(token, asyncio.Future) and not token.done():
            token.set_result(reply.response)

    def fail(self, reply: Reply) -> None:
        """Its caller answers COORDINATOR_NOT_AVAILABLE: the reloaded shard no longer
        parks it."""
        token = reply.token
        if isinstance(token, asyncio.Future) and not token.done():
            token.set_exception(StorageFailure("group records could not be written"))


def _records(batches: list[bytes], start: int, replayer: Replayer | None = None
             ) -> Iterator[tuple[RecordKey, RecordValue | None]]:
    """The typed records of a ``__consumer_offsets`` partition's batches, in order, from
    offset ``start`` (unknown record types are skipped); transactional offsets reach the
    shard where their commit marker stands (``replayer`` keeps those still open)."""
    replayer = replayer if replayer is not None else Replayer()
    for entry in log_entries(batches, start):
        if entry.producer is not None and entry.marker is not None:
            yield from replayer.marker(*entry.producer, entry.marker == CONTROL_COMMIT)
            continue
        if entry.key is None:
            continue
        record = deserialize(entry.key, entry.value)
        if record is not None:
            yield from replayer.record(entry.producer, *record)
