"""Share partitions and share sessions on the partition leader (KIP-932): the asyncio edge
of :mod:`samsa.share`.

* :class:`ShareRuntime` keeps one :class:`~samsa.share.SharePartition` per (share group,
  topic id, partition) this node serves, created at the group's first ShareFetch of the
  partition at the offset ``share.auto.offset.reset`` names (``latest`` by default, as
  Kafka), and runs their acquisition locks on a :class:`~samsa.broker.groups.LoopTimer`
  (early fires re-arm, stale ones are ignored: no expiry is lost);
* share sessions, one per (group, member), at most ``group.share.max.share.sessions``
  (SHARE_SESSION_LIMIT_REACHED beyond): ShareFetch epoch 0 opens one (replacing an old
  one without releasing the member's records, as Kafka 4.3: they stay the member's),
  each later ShareFetch/ShareAcknowledge must carry the next epoch (else
  INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND without a session), epoch -1 closes
  it. A closed session, the connection it was last used on closing, and the member leaving
  the group (or missing its session timeout: the group runtime tells,
  :meth:`ShareRuntime.release_member`) release the member's acquired records (they become
  available again, delivery counts kept);
* records rejected or archived at the delivery limit are copied to the group's
  ``errors.deadletterqueue.topic.name`` topic when it has one (KIP-1191);
* whatever makes records available again (a release, an expired lock) wakes the ShareFetch
  requests waiting for records, as new log data does through the partition's waiters.

Durable state (SPSO, acknowledged and archived records, delivery counts) is kept in the
compacted internal topic ``__share_group_state`` through the broker's partition stores, as
Kafka's share coordinator keeps it (its ShareSnapshot records, :mod:`samsa.share.records`;
the state partition is ``abs(hash("group:topicId:partition")) % partitions``). The topic is
created at the first share fetch; :meth:`ShareRuntime.start` reads it back, so a restarted
broker rebuilds each share partition from its last snapshot (nothing acknowledged is
delivered again; what was acquired is available again). Writes are group-committed: the
changes of one event-loop pass are coalesced into one snapshot per changed share partition
and one append per state partition (:meth:`ShareRuntime.changed` marks, the loop's next
step writes); the acknowledgements behind them are answered once the append is durable
(:meth:`ShareRuntime.durable`, one fsync for every write of a state partition under way).

On a cluster (an engine with :class:`~samsa.broker.storage.ShareStates`: PostgreSQL's
``samsa_share_states``) share partitions follow their partition's lease instead: a node that
gains a lease loads the partition's states before it serves it (:meth:`ShareRuntime.lead`),
one that loses it drops its share partitions (their locks, no save; the sessions stay and
answer NOT_LEADER_OR_FOLLOWER for it, so clients go to the new leader) and a hand-off waits
for their pending saves (:meth:`ShareRuntime.unlead`). Every save is fenced by the lease
epoch. Acquisitions are saved too, before the ShareFetch answer (:meth:`ShareRuntime.acquired`),
with the delivery they are in: records acquired on a node that dies are AVAILABLE on the new
leader with their delivery counts, and are redelivered with a higher one (one acquired for
its last allowed delivery is archived: :func:`at_limit_archived`). The group's coordinator
answers DescribeShareGroupOffsets from the stored states (:meth:`ShareRuntime.refresh`) and
changes them for the admin APIs whichever node leads the partitions; the leaders reload
what changed (:meth:`ShareRuntime.apply_resets`). A cluster's saves are not coalesced.
samsa serves the state itself: the share coordinator's RPCs (FindCoordinator key type 2,
Read/Write/InitializeShareGroupState) are not served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from kio.schema.errors import ErrorCode

from samsa.broker.clock import now_ms
from samsa.broker.groups import LoopTimer
from samsa.broker.metrics import ShareCounters
from samsa.broker.storage import ShareStates
from samsa.broker.topics import SHARE_STATE_TOPIC, Topic, TopicError
from samsa.coordinator.hashing import partition_for
from samsa.protocol.records import ProducerRecordData, decode_batches, encode_batch
from samsa.share import (
    DurableState,
    LockKey,
    OffsetReset,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareUpdate,
)
from samsa.share import records as state_records
from samsa.share.records import ShareSnapshot, ShareStateKey

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.partition import Partition
    from samsa.broker.topics import TopicManager

log = logging.getLogger("samsa.shares")

#: (share group, topic id, partition)
SharePartitionKey = tuple[str, uuid.UUID, int]
#: (topic id, partition)
TopicPartition = tuple[uuid.UUID, int]
#: a coalesced state write: resolved once appended with each state partition written and
#: the offset to wait for there
StateWrite = asyncio.Future[list[tuple["Partition", int]]]

INT32_MAX = 2**31 - 1

Mark: TypeAlias = "tuple[Partition, int] | StateWrite | asyncio.Future[None] | None"
"""What to wait for before answering: an appended state (partition, offset after it), a
coalesced write to come (:meth:`ShareRuntime.changed`), a cluster's save in flight, or
nothing."""


def at_limit_archived(state: DurableState, limit: int) -> DurableState:
    """A state a cluster saved (acquisitions counted) as a new leader takes it: an AVAILABLE
    record already delivered ``limit`` times was acquired for its last delivery on the node
    that died, so it is ARCHIVED as its lock would have left it (its count never passes the
    limit)."""
    state.offsets.update({o: (RecordState.ARCHIVED, n) for o, (st, n) in state.offsets.items()
                          if st is RecordState.AVAILABLE and n >= limit})
    return state


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    #: the epoch the next request must carry
    epoch: int
    connection: object
    partitions: dict[TopicPartition, None] = field(default_factory=dict)

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class ShareRuntime:
    """This node's share partitions and share sessions. ``group_configs(group_id)`` gives
    the group configs set for a group (``share.auto.offset.reset``,
    ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
    ``share.partition.max.record.locks``, ``share.isolation.level``,
    ``share.renew.acknowledge.enable``: KIP-932/KIP-1240/KIP-1222)."""

    def __init__(self, config: BrokerConfig, topics: TopicManager,
                 group_configs: Callable[[str], Mapping[str, str]],
                 states: ShareStates | None = None) -> None:
        self.config = config
        #: the engine's share-partition states (a cluster); None: ``__share_group_state``
        self.states = states
        #: a cluster's partitions whose share states are loaded here (it leads them)
        self.led: set[TopicPartition] = set()
        #: a cluster's saves in flight, by partition
        self._saves: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._seq = 0
        #: a cluster's stored states of groups read for admin answers (:meth:`refresh`)
        self.remote: dict[SharePartitionKey, DurableState] = {}
        #: and the log ends of their partitions, as the engine said then
        self.remote_end: dict[TopicPartition, int] = {}
        self.topics = topics
        self.group_configs = group_configs
        self.timer: LoopTimer[LockKey] = LoopTimer(self._fire)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        #: durable states read at start, not yet taken by a share partition
        self.stored: dict[SharePartitionKey, DurableState] = {}
        #: ``by_duration`` starts looked up (:meth:`find_start`), not yet taken by a share
        #: partition: (offset, timestamp) of the first record late enough, or None
        self._found: dict[SharePartitionKey, tuple[int, int] | None] = {}
        self.state_topic: Topic | None = None
        self.counters = ShareCounters()
        #: share partitions changed since the last coalesced write, and that write
        self._dirty: dict[SharePartitionKey, SharePartition] = {}
        self._pending: StateWrite | None = None

    async def start(self) -> None:
        """Read ``__share_group_state`` back (when it exists; a cluster loads states as it
        gains partitions instead)."""
        topic = self.topics.get(SHARE_STATE_TOPIC)
        if topic is None or self.states is not None:
            return
        self.state_topic = topic
        states: dict[ShareStateKey, DurableState] = {}
        for part in topic.partitions:
            start = part.log.log_start_offset
            try:
                batches = await part.log.read_all()
            except OSError:  # a cluster node that does not hold the partition
                log.warning("share state partition %d not read: not held here", part.index)
                continue
            for data in batches:
                for batch in decode_batches(bytes(data)):
                    if batch.is_control:
                        continue
                    for offset, _, key, value, _ in batch.records:
                        if offset >= start and key is not None:
                            state_records.replay(states, key, value)
        self.stored = {(k.group_id, k.topic_id, k.partition): v for k, v in states.items()}
        log.info("read %d share partition states", len(self.stored))

    def _state_topic(self) -> Topic:
        if self.state_topic is None:
            topic = self.topics.get(SHARE_STATE_TOPIC)
            if topic is None:
                try:
                    topic = self.topics.create(
                        SHARE_STATE_TOPIC,
                        int(self.config["share.coordinator.state.topic.num.partitions"]),
                        {"cleanup.policy": "compact"}, now_ms=now_ms())
                except TopicError:  # created meanwhile (another cluster node)
                    topic = self.topics.get(SHARE_STATE_TOPIC)
                    if topic is None:
                        raise
            self.state_topic = topic
        return self.state_topic

    def _persist(self, part: SharePartition) -> Mark:
        """Append the share partition's durable state as a ShareSnapshot now; returns the
        state partition and the offset to wait for (None when the append failed: logged).
        A cluster saves it through the engine instead (with acquisitions counted)."""
        key = ShareStateKey(*cast(SharePartitionKey, part.owner))
        if self.states is not None:
            return self._save(key, self._snapshot(part, count_acquired=True))
        return self._write([(key, self._snapshot(part))])

    @staticmethod
    def _snapshot(part: SharePartition, count_acquired: bool = False) -> ShareSnapshot:
        return ShareSnapshot(0, part.start_offset,
                             part.state_batches(count_acquired=count_acquired),
                             write_timestamp=now_ms())

    def _write(self, values: list[tuple[ShareStateKey, ShareSnapshot | None]]
               ) -> tuple[Partition, int] | None:
        """Append the records (a None value is a tombstone) of one state partition as one
        batch."""
        now = now_ms()
        try:
            topic = self._state_topic()
            target = topic.partitions[partition_for(values[0][0].coordinator_key(),
                                                    len(topic.partitions))]
            batch = encode_batch([ProducerRecordData(
                now, state_records.encode_key(key),
                None if value is None else state_records.encode_snapshot(value), ())
                for key, value in values])
            info = target.log.append(batch, now)
        except Exception:
            log.exception("could not write the state of share partitions %s",
                          [key for key, _ in values])
            return None
        target.notify()
        return target, info.last_offset + 1

    def _schedule(self, part: SharePartition) -> StateWrite:
        """Mark ``part`` for the next coalesced write (at the loop's next step)."""
        self._dirty[cast(SharePartitionKey, part.owner)] = part
        if self._pending is None:
            loop = asyncio.get_running_loop()
            self._pending = loop.create_future()
            loop.call_soon(self._write_dirty)
        return self._pending

    def _write_dirty(self) -> None:
        """Write the latest state of every share partition changed since the last call:
        one snapshot each, one append per state partition."""
        dirty, self._dirty = self._dirty, {}
        pending, self._pending = self._pending, None
        by_target: dict[int, list[tuple[ShareStateKey, ShareSnapshot | None]]] = {}
        marks: list[tuple[Partition, int]] = []
        try:
            topic = self._state_topic()
            for key, part in dirty.items():
                if self.partitions.get(key) is not part:
                    continue  # reset or dropped since: the replacement wrote its own state
                state_key = ShareStateKey(*key)
                index = partition_for(state_key.coordinator_key(), len(topic.partitions))
                by_target.setdefault(index, []).append((state_key, self._snapshot(part)))
            for values in by_target.values():
                mark = self._write(values)
                if mark is not None:
                    marks.append(mark)
        except Exception:
            log.exception("could not write the state of share partitions")
        if pending is not None and not pending.done():
            pending.set_result(marks)

    async def durable(self, marks: Iterable[Mark]) -> None:
        """Wait until the writes ``marks`` stand for (:meth:`changed`) are on disk (a
        cluster's saves done: an OSError if the lease moved)."""
        ends: dict[int, tuple[Partition, int]] = {}
        saves: list[asyncio.Future[Any]] = []
        for mark in marks:
            if mark is None:
                continue
            if isinstance(mark, tuple):
                written = [mark]
            elif self.states is not None:
                saves.append(mark)
                continue
            else:
                written = await cast(StateWrite, mark)
            for part, end in written:
                if end > ends.get(id(part), (part, -1))[1]:
                    ends[id(part)] = (part, end)
        waits: list[Any] = [*saves, *(part.log.wait_durable(end) for part, end in ends.values())]
        if waits:
            await asyncio.gather(*waits)

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        """The group's share partition settings: its group configs, else the broker's."""
        own = self.group_configs(group_id)
        config = self.config
        return SharePartitionConfig(
            record_lock_duration_ms=int(own.get("share.record.lock.duration.ms",
                                                config["group.share.record.lock.duration.ms"])),
            delivery_count_limit=int(own.get("share.delivery.count.limit",
                                             config["group.share.delivery.count.limit"])),
            max_record_locks=int(own.get("share.partition.max.record.locks",
                                         config["group.share.partition.max.record.locks"])),
        )

    def renew_enabled(self, group_id: str) -> bool:
        """The group's ``share.renew.acknowledge.enable`` (KIP-1222; default true)."""
        value = self.group_configs(group_id).get("share.renew.acknowledge.enable", "true")
        return str(value).strip().lower() == "true"

    def read_committed(self, group_id: str) -> bool:
        """The group's ``share.isolation.level`` is ``read_committed`` (default
        ``read_uncommitted``, as Kafka)."""
        return self.group_configs(group_id).get("share.isolation.level") == "read_committed"

    def close(self) -> None:
        self.timer.close()
        self._wake()

    # ------------------------------------------------------------------ partitions

    async def find_start(self, group_id: str, topic_id: uuid.UUID, part: Partition) -> None:
        """Look up the ``by_duration`` start of the group's share partition before
        :meth:`partition` creates it (ShareFetch awaits this first): a shared engine reads
        its database without holding up the event loop. Returns at once, without waiting,
        when the share partition exists or has a stored state, or starts otherwise."""
        key = (group_id, topic_id, part.index)
        if key in self.partitions or key in self.stored:
            return
        reset = self._reset(group_id)
        if reset.strategy == "by_duration":
            with contextlib.suppress(OSError):  # moved meanwhile: the fetch answers for it
                self._found[key] = await part.log.find_timestamp(now_ms() - reset.duration_ms)

    def _reset(self, group_id: str) -> OffsetReset:
        return OffsetReset.parse(
            self.group_configs(group_id).get("share.auto.offset.reset", "latest"))

    def partition(self, group_id: str, topic_id: uuid.UUID, part: Partition) -> SharePartition:
        """The group's share partition, created at its reset offset on first use, with the
        group's current share-partition configs (a ``by_duration`` start as
        :meth:`find_start` found it; else looked up blocking)."""
        key = (group_id, topic_id, part.index)
        found = self.partitions.get(key)
        if found is None:
            log = part.log
            reset = self._reset(group_id)
            looked_up = key in self._found
            hit_found = self._found.pop(key, None)

            def by_time(ts: int) -> int | None:
                hit = hit_found if looked_up else log.offset_for_timestamp(ts)
                return None if hit is None else hit[0]

            start = reset.start_offset(log.log_start_offset, log.log_end_offset, now_ms(),
                                       by_time)
            stored = self.stored.pop(key, None)
            config = self.partition_config(group_id)
            if stored is not None:
                found = SharePartition.from_durable(key, stored, self.timer, config)
            else:
                found = SharePartition(key, start, self.timer, config)
                self._persist(found)  # the start offset, as Kafka's InitializeShareGroupState
            self.partitions[key] = found
        else:  # the group's configs as they are now (Kafka reads them at each use)
            found.config = self.partition_config(group_id)
        return found

    def state(self, group_id: str, topic_id: uuid.UUID, index: int) -> DurableState | None:
        """The share partition's durable state (live or read at start); None: never read."""
        key = (group_id, topic_id, index)
        part = self.partitions.get(key)
        if part is not None:
            return part.durable()
        return self.stored.get(key) or self.remote.get(key)

    def partitions_of(self, group_id: str) -> list[TopicPartition]:
        """Every (topic id, partition) the group has share state for."""
        return sorted({(t, p) for g, t, p in (*self.partitions, *self.stored, *self.remote)
                       if g == group_id},
                      key=lambda tp: (str(tp[0]), tp[1]))

    def existing(self, group_id: str, topic_id: uuid.UUID,
                 index: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic_id, index))

    def _fire(self, key: LockKey) -> None:
        owner = key.owner
        part = self.partitions.get(owner) if isinstance(owner, tuple) else None
        if part is not None:
            update = part.fire(key, now_ms())
            self.counters.lock_expiries += update is not None
            self.changed(part, update)

    def changed(self, part: SharePartition, update: ShareUpdate | None) -> Mark:
        """``part``'s durable state changed (``update``): it is written at the loop's next
        step (coalesced with the other changes of this step; a cluster saves it at once),
        and fetches waiting for records wake. Returns what to pass :meth:`durable` before
        answering."""
        if update is None:
            return None
        mark = self._persist(part) if self.states is not None else self._schedule(part)
        dead = part.take_dead()
        self.counters.observe(update, len(dead))
        if dead:
            self._dead_letters(part, dead)
        self._wake()
        return mark

    def _dead_letters(self, part: SharePartition, dead: list[tuple[int, int]]) -> None:
        """KIP-1191: copy records rejected or archived at the delivery limit to the group's
        ``errors.deadletterqueue.topic.name`` topic (which must exist), with headers naming
        where they came from (``__dlq.errors.*``: group, topic, partition, offset, delivery
        count)."""
        group_id, topic_id, index = cast(SharePartitionKey, part.owner)
        name = self.group_configs(group_id).get("errors.deadletterqueue.topic.name", "")
        if not name:
            return
        dlq = self.topics.get(name)
        source_topic = self.topics.by_id(topic_id)
        source = None if source_topic is None else self.topics.partition(source_topic.name,
                                                                         index)
        if dlq is None or source is None or source_topic is None:
            log.warning("dead-letter topic %r of share group %r does not exist", name,
                        group_id)
            return
        wanted = dict(dead)
        now = now_ms()
        out = []
        try:
            for offset in sorted(wanted):
                for batch in decode_batches(bytes(source.log.read(offset, 1 << 20))):
                    for rec_offset, ts, key, value, headers in batch.records:
                        if rec_offset == offset:
                            origin = [("__dlq.errors.group.id", group_id),
                                      ("__dlq.errors.topic", source_topic.name),
                                      ("__dlq.errors.partition", str(index)),
                                      ("__dlq.errors.offset", str(offset)),
                                      ("__dlq.errors.delivery.count", str(wanted[offset]))]
                            out.append(ProducerRecordData(
                                ts, key, value,
                                [*headers, *((k, v.encode()) for k, v in origin)]))
                    break
            if out:
                target = dlq.partitions[index % len(dlq.partitions)]
                target.log.append(encode_batch(out), now)
                target.notify()
                self.counters.dead_letters += len(out)
        except Exception:
            log.exception("could not write dead letters of share group %r to %r", group_id,
                          name)

    # ------------------------------------------------------------------ waiting

    def waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        return fut

    def forget(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ sessions

    def session(self, group_id: str, member_id: str, epoch: int, connection: object,
                opening: bool) -> ShareSession:
        """The member's session for a request carrying ``epoch`` (0 opens one when
        ``opening``: ShareFetch only); raises :class:`SessionError` with Kafka's code."""
        key = (group_id, member_id)
        if epoch == 0:
            if not opening:
                raise SessionError(ErrorCode.invalid_share_session_epoch,
                                   "ShareAcknowledge cannot open a share session.")
            limit = int(self.config["group.share.max.share.sessions"])
            if key not in self.sessions and len(self.sessions) >= limit:
                raise SessionError(ErrorCode.share_session_limit_reached,
                                   f"The broker keeps at most {limit} share sessions.")
            opened = ShareSession(group_id, member_id, 1, connection)
            self.sessions[key] = opened
            return opened
        found = self.sessions.get(key)
        if found is None:
            raise SessionError(ErrorCode.share_session_not_found,
                               f"Share session for member {member_id} not found.")
        if epoch != -1:
            if epoch != found.epoch:
                raise SessionError(ErrorCode.invalid_share_session_epoch,
                                   f"Share session epoch {epoch} is not the expected "
                                   f"{found.epoch}.")
            found.advance()
        found.connection = connection
        return found

    def close_session(self, session: ShareSession) -> None:
        """The session ends: its member's acquired records are released."""
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
        self.release_member(session.group_id, session.member_id)

    def release_member(self, group_id: str, member_id: str) -> None:
        for (gid, _, _), part in list(self.partitions.items()):
            if gid == group_id:
                self.changed(part, part.release_member(member_id))

    def connection_closed(self, connection: object) -> None:
        """A client connection closed: the sessions last used on it close."""
        for session in [s for s in self.sessions.values() if s.connection is connection]:
            self.close_session(session)

    def delete_group(self, group_id: str) -> Mark:
        """The group was deleted: its share partitions go, their stored states get
        tombstones (a cluster forgets them in the engine: what to wait for), and its
        sessions end."""
        for session in [s for s in self.sessions.values() if s.group_id == group_id]:
            del self.sessions[(session.group_id, session.member_id)]
        keys = {k for k in (*self.partitions, *self.stored, *self.remote) if k[0] == group_id}
        if self.states is not None:
            return self._admin(keys, self.states.reset(group_id, None))
        self._drop(keys)
        return None

    def reset_start(self, group_id: str, topic_id: uuid.UUID, part: Partition,
                    offset: int) -> Mark:
        """AlterShareGroupOffsets: the share partition starts afresh at ``offset`` (within
        the log), its locks and state gone; the new state is written (a cluster writes it
        in the engine, whichever node leads the partition: what to wait for; the leader
        keeps the start within the log as it fetches)."""
        key = (group_id, topic_id, part.index)
        log = part.log
        start = (min(max(offset, log.log_start_offset), log.log_end_offset)
                 if self.serves(topic_id, part.index) else max(offset, 0))
        if self.states is not None:
            value = ShareSnapshot(0, start, (), write_timestamp=now_ms())
            topic = self.topics.by_id(topic_id)
            if topic is None:
                return None
            return self._admin({key}, self.states.reset(
                group_id, state_records.encode_snapshot(value), topic.name, part.index),
                value.durable())
        old = self.partitions.pop(key, None)
        if old is not None:
            old.release_all()
        self.stored.pop(key, None)
        fresh = SharePartition(key, start, self.timer, self.partition_config(group_id))
        self.partitions[key] = fresh
        self._persist(fresh)
        return None

    def forget_topic(self, group_id: str, topic_id: uuid.UUID) -> Mark:
        """DeleteShareGroupOffsets: the group's state of the topic goes (tombstones); its
        next fetch starts again where ``share.auto.offset.reset`` says."""
        keys = {k for k in (*self.partitions, *self.stored, *self.remote)
                if k[0] == group_id and k[1] == topic_id}
        topic = self.topics.by_id(topic_id)
        if self.states is not None:
            if topic is None:
                return None
            return self._admin(keys, self.states.reset(group_id, None, topic.name))
        self._drop(keys)
        return None

    def _drop(self, keys: Iterable[SharePartitionKey]) -> None:
        """Share partitions go: their locks, their state (a tombstone is written)."""
        for key in keys:
            self._forget(key)
            self._write([(ShareStateKey(*key), None)])

    def _forget(self, key: SharePartitionKey) -> None:
        part = self.partitions.pop(key, None)
        if part is not None:
            part.release_all()
        self.stored.pop(key, None)
        self.remote.pop(key, None)

    def forget_topics(self, topic_ids: Iterable[uuid.UUID]) -> None:
        """Deleted topics: their share partitions (and locks) go."""
        gone = set(topic_ids)
        for key in [k for k in self.partitions if k[1] in gone]:
            self.partitions.pop(key).release_all()

    # ------------------------------------------------------------------ cluster

    def serves(self, topic_id: uuid.UUID, index: int) -> bool:
        """Whether this node serves the partition's share partitions (a cluster: while it
        leads it and their states are loaded; a single node: always)."""
        return self.states is None or (topic_id, index) in self.led

    def acquired(self, part: SharePartition) -> Mark:
        """Records were just acquired: a cluster saves them (with the delivery they are
        in) before the answer; a single node does not."""
        return None if self.states is None else self._persist(part)

    async def lead(self, topic: str, index: int) -> None:
        """This node now leads the partition: load its share partitions' states (before
        it serves it)."""
        found = self.topics.get(topic)
        part = self.topics.partition(topic, index)
        if self.states is None or found is None or part is None:
            return
        tp = (found.topic_id, index)
        self._unload(tp)
        loaded = await self.states.load(part.log)
        for group_id, raw in loaded.items():
            self.stored[(group_id, tp[0], index)] = at_limit_archived(
                state_records.decode_snapshot(raw).durable(),
                self.partition_config(group_id).delivery_count_limit)
        self.led.add(tp)
        if loaded:
            log.info("loaded %d share partition states of %s-%d", len(loaded), topic, index)

    def unlead(self, topic: str, index: int) -> Awaitable[object]:
        """This node no longer leads the partition: its share partitions go at once (locks
        cancelled, nothing saved); the awaitable is done once the saves already in flight
        are."""
        found = self.topics.get(topic)
        if self.states is None or found is None:
            return asyncio.gather()
        tp = (found.topic_id, index)
        self._unload(tp)
        return asyncio.gather(*self._saves.get(tp, ()), return_exceptions=True)

    def _unload(self, tp: TopicPartition) -> None:
        self.led.discard(tp)
        for key in [k for k in self.partitions if (k[1], k[2]) == tp]:
            self.partitions.pop(key).release_all()
        for key in [k for k in self.stored if (k[1], k[2]) == tp]:
            del self.stored[key]
        self._wake()  # fetches waiting on it answer NOT_LEADER_OR_FOLLOWER

    def _save(self, key: ShareStateKey, value: ShareSnapshot) -> Mark:
        """Save a state through the engine, in order; the save's task."""
        assert self.states is not None
        topic = self.topics.by_id(key.topic_id)
        part = None if topic is None else self.topics.partition(topic.name, key.partition)
        if part is None:
            return None
        self._seq += 1
        raw = state_records.encode_snapshot(value)
        task = asyncio.ensure_future(self.states.save(part.log, key.group_id, raw, self._seq))
        pending = self._saves.setdefault((key.topic_id, key.partition), set())
        pending.add(task)

        def done(fut: asyncio.Future[None]) -> None:
            pending.discard(fut)
            if not fut.cancelled() and fut.exception() is not None:
                log.warning("state of share partition %s not saved: %s", key, fut.exception())

        task.add_done_callback(done)
        return task

    def _admin(self, keys: Iterable[SharePartitionKey], change: Awaitable[None],
               state: DurableState | None = None) -> asyncio.Future[None]:
        """A cluster's admin change of ``keys`` (to ``state``; None: forgotten): the share
        partitions this node serves reload at once, the engine's ``change`` is what to wait
        for (the nodes leading the others reload on their next tick)."""
        for key in keys:
            self._forget(key)
            if state is not None and (key[1], key[2]) in self.led:
                self.stored[key] = state
        return asyncio.ensure_future(change)

    async def apply_resets(self) -> None:
        """Other nodes changed share states (the admin APIs): the share partitions this
        node serves reload them."""
        if self.states is None:
            return
        for name, index, group_id, raw in await self.states.take_resets():
            topic = self.topics.get(name)
            if topic is None or (topic.topic_id, index) not in self.led:
                continue
            key = (group_id, topic.topic_id, index)
            self._forget(key)
            if raw is not None:
                self.stored[key] = state_records.decode_snapshot(raw).durable()
            log.info("share partition %s reset by an admin change", key)

    def log_end(self, topic_id: uuid.UUID, part: Partition) -> int:
        """The partition's log end: from the engine's last read (:meth:`refresh`) when a
        cluster's other node leads it."""
        if self.serves(topic_id, part.index):
            return part.log.log_end_offset
        return self.remote_end.get((topic_id, part.index), part.log.log_end_offset)

    async def refresh(self, group_id: str) -> None:
        """A cluster's coordinator reads the group's stored states (those of partitions
        other nodes lead) before an admin answer (:meth:`state`, :meth:`partitions_of`)."""
        if self.states is None:
            return
        rows = await self.states.read_group(group_id)
        for key in [k for k in self.remote if k[0] == group_id]:
            del self.remote[key]
        for name, index, raw, end in rows:
            topic = self.topics.get(name)
            if topic is not None:
                self.remote[(group_id, topic.topic_id, index)] = (
                    state_records.decode_snapshot(raw).durable())
                self.remote_end[(topic.topic_id, index)] = end
