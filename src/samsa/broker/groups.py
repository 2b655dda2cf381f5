"""The group coordinator's asyncio edge.

Owns the ``__consumer_offsets`` topic (created on first start, compacted, one partition per
coordinator shard), replays each partition into its shard on start, runs the coordinator's
keyed timers on the event loop and turns every coordinator result into log appends and
replies:

* a request's event goes to :meth:`GroupRuntime.call`, which hands the coordinator a future
  as reply token and awaits it (a parked JoinGroup/SyncGroup is answered by a later result);
* the result's records are appended synchronously (one batch per shard), then the replies
  wait for their fsync (group commit with produce's acks=all writers) before being sent;
* the result's jobs (target assignments, regex resolutions) start once its records are
  appended (:mod:`samsa.broker.group_jobs`: inline ones at once, offloaded ones in worker
  processes); each outcome comes back to the loop as ``coordinator.complete``, a result
  like any other. The jobs of a result whose append failed are dropped;
* if an append or its fsync fails (a storage error), the touched shards are reloaded from
  their logs (requests still parked there get NOT_COORDINATOR) and every request the lost
  result answered gets COORDINATOR_NOT_AVAILABLE; clients rediscover and rejoin. That is
  the only recovery story: nothing is snapshotted or reverted (a reloaded shard asks for
  the jobs it still needs, and ignores the outcomes of those it asked for before). A cluster
  node reloads from the database, after the appends it made before have committed, while it
  holds the lease (it loads shards it is given the same way, retrying a failed read);
  meanwhile the shard answers COORDINATOR_LOAD_IN_PROGRESS, never "group not found";
* before a ConsumerGroupHeartbeat is answered GROUP_ID_NOT_FOUND (fatal for the member), a
  cluster node confirms its lease with the database: a node that lost it (paused past its
  TTL, not ticked since) answers NOT_COORDINATOR and drops the shard.

Offsets expiry is the coordinator's own keyed timer (``offsets.retention.check.interval.ms``).

KIP-848 consumer groups read topic metadata (ids, names, partition counts, racks) from a
:class:`TopicsSnapshot` the edge hands the coordinator before loading and again whenever the
topics differ from the last snapshot, checked before each consumer-protocol request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from samsa.broker.clock import now_ms
from samsa.broker.group_jobs import JobRunner
from samsa.broker.partition import Partition
from samsa.broker.topics import OFFSETS_TOPIC, Topic, TopicError
from samsa.coordinator import (
    Coordinator,
    CoordinatorConfig,
    Event,
    Record,
    Result,
    TimerKey,
    error_response,
)
from samsa.coordinator.consumer.topics import TopicInfo, TopicsSnapshot
from samsa.coordinator.events import ConsumerGroupDescribe, ConsumerGroupHeartbeat
from samsa.coordinator.history import LoadInfo
from samsa.coordinator.jobs import Job
from samsa.coordinator.records import deserialize, serialize
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse, Response
from samsa.coordinator.shard import CoordinatorShard
from samsa.protocol.records import ProducerRecordData, decode_batches, encode_batch
from samsa.storage.pg.log import LeaseLost, PgPartitionLog, records_of

if TYPE_CHECKING:
    from samsa.broker.server import Broker

log = logging.getLogger("samsa.groups")

#: The broker settings the coordinator reads (``CoordinatorConfig.from_properties`` ignores
#: the rest): every ``group.*``, ``offsets.*`` and ``offset.*`` setting.
COORDINATOR_PREFIXES = ("group.", "offsets.", "offset.")


class StorageFailure(Exception):
    """The records behind a reply could not be written or fsynced."""


class LoopTimer:
    """The coordinator's :class:`~samsa.coordinator.Timer` on the asyncio loop.

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

    def __init__(self, fire: Callable[[TimerKey], None],
                 now: Callable[[], int] = now_ms) -> None:
        self._fire_key = fire
        self._now = now
        self._deadlines: dict[TimerKey, int] = {}
        self._handles: dict[TimerKey, tuple[asyncio.TimerHandle, int]] = {}

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self._deadlines[key] = deadline_ms
        armed = self._handles.get(key)
        if armed is not None:
            if armed[1] <= deadline_ms:
                return
            armed[0].cancel()
        self._arm(key, deadline_ms)

    def _arm(self, key: TimerKey, deadline_ms: int) -> None:
        delay = max(0.0, (deadline_ms - self._now()) / 1000)
        handle = asyncio.get_running_loop().call_later(delay, self._fire, key)
        self._handles[key] = (handle, deadline_ms)

    def cancel(self, key: TimerKey) -> None:
        self._deadlines.pop(key, None)
        armed = self._handles.pop(key, None)
        if armed is not None:
            armed[0].cancel()

    def _fire(self, key: TimerKey) -> None:
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
        self.timer = LoopTimer(self.fire)
        self.coordinator: Coordinator | None = None
        self.topic: Topic | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loads: set[asyncio.Task[None]] = set()
        self._topics_seen: tuple[tuple[object, int], ...] | None = None
        #: shard -> its last load and when it finished (the console's coordinator health)
        self.loads: dict[int, LoadInfo] = {}
        self.loaded_at: dict[int, int] = {}
        self.jobs = JobRunner(int(broker.config["group.coordinator.background.threads"]),
                              self._job_done)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Create or open ``__consumer_offsets`` and load every shard (on the loop)."""
        config = self.broker.config
        topics = self.broker.topics
        topic = topics.get(OFFSETS_TOPIC)
        if topic is None:
            try:
                topic = topics.create(OFFSETS_TOPIC, int(config["offsets.topic.num.partitions"]),
                                      now_ms=now_ms())
            except TopicError:  # another cluster node created it meanwhile
                topic = topics.get(OFFSETS_TOPIC)
                if topic is None:
                    raise
        self.topic = topic
        props: dict[str, object] = {s.name: value for s, value, _ in config.items()
                                    if s.name.startswith(COORDINATOR_PREFIXES)}
        # Like Kafka, the existing topic's partition count decides where groups live.
        props["offsets.topic.num.partitions"] = len(topic.partitions)
        coordinator_config = replace(CoordinatorConfig.from_properties(props),
                                     group_configs=topics.dynamic.group_overrides)
        self.coordinator = Coordinator(coordinator_config, self.timer)
        self.sync_topics()
        if self.broker.engine is not None:
            return  # a cluster node loads the shards it is given (take_shard)
        started = now_ms()
        for part in topic.partitions:
            loading = time.perf_counter()
            self._load(part)
            self.broker.metrics.shard_loaded(part.index, time.perf_counter() - loading)
        log.info("loaded %d coordinator shards in %d ms", len(topic.partitions),
                 now_ms() - started)

    async def stop(self) -> None:
        self.timer.close()
        for task in self._loads:
            task.cancel()
        self.jobs.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _load(self, part: Partition) -> None:
        coord = self._coord()
        started = now_ms()
        shard = coord.begin_load(part.index)
        for key, value in _records_of(part):
            record = deserialize(key, value)
            if record is not None:
                shard.replay(*record)
        info = LoadInfo(started, self.broker.config.node_id)
        self._apply(coord.finish_load(part.index, now_ms(), info))
        self.loads[part.index], self.loaded_at[part.index] = info, now_ms()

    # -- requests and timers --------------------------------------------------------------
    def _coord(self) -> Coordinator:
        assert self.coordinator is not None, "group runtime not started"
        return self.coordinator

    async def call(self, event: Event) -> Response:
        """Handle one request event; returns its (possibly deferred) response."""
        if isinstance(event, (ConsumerGroupHeartbeat, ConsumerGroupDescribe)):
            self.sync_topics()
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        result = self._coord().handle(event, now_ms(), reply_to=fut)
        self.broker.metrics.observe_group(self._coord(), getattr(event, "group_id", None))
        self._apply(result)
        try:
            response = await fut
        except StorageFailure:
            return error_response(event, int(ErrorCode.coordinator_not_available))
        if (isinstance(event, ConsumerGroupHeartbeat)
                and isinstance(response, ConsumerGroupHeartbeatResponse)
                and response.error_code == ErrorCode.group_id_not_found
                and not await self._still_coordinator(event.group_id)):
            return error_response(event, int(ErrorCode.not_coordinator))
        return response

    async def _still_coordinator(self, group_id: str) -> bool:
        """A cluster node asks the database whether it still holds the group's shard before
        telling a member its group is gone (fatal for librdkafka and Java): a node paused
        past its lease answers from what it held until it notices."""
        cluster = self.broker.cluster
        if cluster is None or self.topic is None:
            return True
        plog = self.topic.partitions[self.partition_for(group_id)].log
        return not isinstance(plog, PgPartitionLog) or await cluster.confirm(plog.pid)

    def fire(self, key: TimerKey) -> None:
        self._apply(self._coord().fire(key, now_ms()))
        self.broker.metrics.observe_group(self._coord(), key.group_id)

    def _job_done(self, job: Job, outcome: object) -> None:
        if self.coordinator is not None:
            self._apply(self.coordinator.complete(job, outcome, now_ms()))
            self.broker.metrics.observe_group(self.coordinator, job.group_id)

    def _start_jobs(self, result: Result) -> None:
        for job in sorted(result.jobs, key=lambda j: j.offload):  # inline ones first
            self.jobs.start(job)

    def _apply(self, result: Result) -> bool:
        """Append the result's records, then deliver its replies once they are durable;
        start its jobs once the records are appended."""
        if not result.records:
            _deliver(result)
            self._start_jobs(result)
            return True
        try:
            synced = self._append(result.records)
        except Exception:
            log.exception("appending group records failed; reloading the shards")
            self._reload({r.partition for r in result.records})
            _fail(result, StorageFailure("group records could not be written"))
            return False
        task = asyncio.create_task(self._deliver_when_durable(synced, result))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._start_jobs(result)
        return True

    def _append(self, records: tuple[Record, ...]) -> list[tuple[Partition, int]]:
        assert self.topic is not None
        by_partition: dict[int, list[Record]] = defaultdict(list)
        for r in records:
            by_partition[r.partition].append(r)
        now = now_ms()
        synced = []
        for index, recs in by_partition.items():
            part = self.topic.partitions[index]
            batch = encode_batch([ProducerRecordData(now, *serialize(r.key, r.value), ())
                                  for r in recs])
            info = part.log.append(batch, now)
            part.notify()
            synced.append((part, info.last_offset + 1))
        return synced

    async def _deliver_when_durable(self, synced: list[tuple[Partition, int]],
                                    result: Result) -> None:
        flusher = self.broker.flusher
        try:
            await asyncio.gather(*(flusher.sync(part, end) for part, end in synced))
        except OSError:
            log.exception("fsync of group records failed; reloading the shards")
            self._reload({part.index for part, _ in synced})
            _fail(result, StorageFailure("fsync failed"))
            return
        _deliver(result)

    def _reload(self, partitions: set[int]) -> None:
        assert self.topic is not None
        coord = self._coord()
        for index in partitions:
            _deliver(coord.unload(index))
            part = self.topic.partitions[index]
            plog = part.log
            if not isinstance(plog, PgPartitionLog):
                self._load(part)
            elif plog.is_leader:  # else the lease is gone: the cluster claims it again
                task = asyncio.create_task(self._replay(coord.begin_load(index), plog))
                self._loads.add(task)
                task.add_done_callback(self._loads.discard)

    def sync_topics(self) -> None:
        """Hand the coordinator a new :class:`TopicsSnapshot` if topics were created, deleted
        or grew since the last one (a single node: every replica is on this broker's rack)."""
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

    # -- shards moving between cluster nodes ---------------------------------------------
    async def take_shard(self, index: int, plog: PgPartitionLog,
                         previous_node: int | None = None) -> None:
        """Load shard ``index`` by replaying its records (this node now holds its lease,
        taken from ``previous_node`` if another node held it); its groups answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        await self._replay(self._coord().begin_load(index), plog, previous_node)

    async def _replay(self, shard: CoordinatorShard, plog: PgPartitionLog,
                      previous_node: int | None = None) -> None:
        """Fill the LOADING ``shard`` from the database once every append this node made
        to it has committed (a reload after a failed append: an earlier result may still be
        on its way, and its answers promise its records). A failed read is retried while
        the node holds the lease and nobody replaced the shard."""
        coord = self._coord()
        index = shard.partition
        epoch = plog.epoch
        started = now_ms()
        loading = time.perf_counter()
        backoff = 0.05
        while True:
            if plog.epoch != epoch or coord.shards.get(index) is not shard:
                return  # lost or reloaded meanwhile
            try:
                await plog.wait_appended()
                records = records_of(await plog.read_all())
                break
            except LeaseLost:
                if coord.shards.get(index) is shard:
                    self.drop_shard(index)
                return
            except Exception:
                log.exception("loading coordinator shard %d failed; retrying", index)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        if plog.epoch != epoch or coord.shards.get(index) is not shard:
            return  # lost or reloaded meanwhile
        for key, value in records:
            record = deserialize(key, value)
            if record is not None:
                shard.replay(*record)
        info = LoadInfo(started, self.broker.config.node_id, previous_node, epoch)
        self._apply(coord.finish_load(index, now_ms(), info))
        self.loads[index], self.loaded_at[index] = info, now_ms()
        self.broker.metrics.shard_loaded(index, time.perf_counter() - loading)
        log.info("loaded coordinator shard %d (%d records) in %.0f ms", index, len(records),
                 (time.perf_counter() - loading) * 1000)

    def drop_shard(self, index: int) -> None:
        """Unload shard ``index``: parked requests get NOT_COORDINATOR, its timers stop."""
        if self.coordinator is not None and index in self.coordinator.shards:
            _deliver(self.coordinator.unload(index))
            log.info("unloaded coordinator shard %d", index)

    # -- lookups for FindCoordinator ------------------------------------------------------
    def coordinator_error(self, group_id: str) -> int:
        return self._coord().coordinator_error(group_id)

    def partition_for(self, group_id: str) -> int:
        return self._coord().partition_for(group_id)


def _fail(result: Result, error: StorageFailure) -> None:
    """Every request answered in a result whose records were lost gets ``error`` (its
    caller answers COORDINATOR_NOT_AVAILABLE): the reloaded shard no longer parks them."""
    for reply in result.replies:
        token = reply.token
        if isinstance(token, asyncio.Future) and not token.done():
            token.set_exception(error)


def _deliver(result: Result) -> None:
    for reply in result.replies:
        token = reply.token
        if isinstance(token, asyncio.Future) and not token.done():
            token.set_result(reply.response)


def _records_of(part: Partition) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) record of a ``__consumer_offsets`` partition, in order."""
    out: list[tuple[bytes, bytes | None]] = []
    log_ = part.log
    offset = log_.log_start_offset
    while offset < log_.log_end_offset:
        data = bytes(log_.read(offset, 1 << 20))
        if not data:
            break
        progressed = offset
        for batch in decode_batches(data):
            if not batch.is_control:
                out.extend((key, value) for off, _, key, value, _ in batch.records
                           if off >= offset and key is not None)
            progressed = batch.next_offset
        if progressed <= offset:
            break
        offset = progressed
    return out
