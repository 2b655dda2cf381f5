"""Shard state and the primitives every handler uses.

Hard state (:class:`HardState`) is exactly what the ``__consumer_offsets`` records say: the
latest group metadata value per group, the latest committed offset per partition, the
consumer groups, the share groups and the history. It changes only by replaying records,
through the shard's replay switch (:data:`samsa.coordinator.shard.REPLAY`: each family
replays its own record types). Soft state is the live classic groups (:class:`Group`), their
parked requests, the shard's timer deadlines, the background jobs it awaits (:mod:`.jobs`)
and the replies parked on them.

How results are applied: a handler mutates soft state and calls :meth:`ShardCore.write` with
a record of the pure factories (:mod:`.record_factory`, :mod:`.consumer.record_factory`,
:mod:`.share.record_factory`), which appends it to the call's result and immediately replays
it into hard state. The edge appends ``Result.records`` to the log and only then delivers
``Result.replies``. If the append fails, the edge reloads the shard from its log and answers
every request of the failed result with an error.

The shard's group types (:mod:`.family`) keep their state here; :meth:`ShardCore.find_group`
finds a group of any type, with its family.

Each call also feeds the shard's :class:`~.history.recorder.HistoryRecorder` (its trigger,
every record written, every classic state change); before the result is built the recorder
writes the history events the call produced, through :meth:`ShardCore.write` like any
record.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.coordinator.config import CoordinatorConfig
from samsa.coordinator.consumer.group import ConsumerGroups
from samsa.coordinator.consumer.topics import EMPTY_TOPICS, TopicsSnapshot
from samsa.coordinator.family import GroupFamily, OffsetsGroup
from samsa.coordinator.group import Group
from samsa.coordinator.history.model import GroupHistories, HistoryEvent, HistoryKey
from samsa.coordinator.history.recorder import HistoryRecorder
from samsa.coordinator.jobs import Job, JobKind, Waiting
from samsa.coordinator.records import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
)
from samsa.coordinator.responses import Response
from samsa.coordinator.result import Record, Reply, Result
from samsa.coordinator.share.group import ShareGroups
from samsa.coordinator.timers import Timer, TimerKey, TimerKind
from samsa.coordinator.txn_pending import PendingTxnOffsets

TopicPartition = tuple[str, int]
MemberIdFactory = Callable[[str], str]


def default_member_id(prefix: str) -> str:
    """Kafka's member ids: ``<client id or group instance id>-<uuid4>``."""
    return f"{prefix}-{uuid.uuid4()}"


@dataclass
class HardState:
    """The persisted state of one shard, rebuilt by replaying its records."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = field(default_factory=dict)
    #: the consumer (KIP-848) groups, live: they change only by replaying their records
    consumer: ConsumerGroups = field(default_factory=ConsumerGroups)
    #: each group's recent rebalance history (samsa's own record type)
    history: GroupHistories = field(default_factory=GroupHistories)
    #: offsets staged by open transactions (:mod:`samsa.coordinator.txn_offsets`)
    pending_txn: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)
    #: the share (KIP-932) groups, live like consumer groups
    share: ShareGroups = field(default_factory=ShareGroups)

    def replay(self, key: RecordKey, value: RecordValue | None) -> None:
        """Apply one record (``value is None``: a tombstone) through the shard's replay
        switch (:data:`samsa.coordinator.shard.REPLAY`: each family's record types, and the
        offsets and history records every type shares)."""
        _replay_switch()[type(key)](self, key, value)

    def replay_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            offsets = self.offsets.get(key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.offsets[key.group]
        else:
            self.offsets.setdefault(key.group, {})[tp] = value

    def replay_history(self, key: HistoryKey, value: HistoryEvent | None) -> None:
        self.history.replay(key, value)

    def group_ids(self) -> list[str]:
        """Classic groups (and offset-only ids); consumer and share groups are in
        ``consumer`` and ``share``."""
        ids = dict.fromkeys([*self.groups, *self.offsets])
        return [g for g in ids if g not in self.consumer.groups and g not in self.share.groups]


Replayer = Callable[[HardState, Any, Any], None]


@functools.cache
def _replay_switch() -> Mapping[type, Replayer]:
    from samsa.coordinator.shard import REPLAY  # the shard holds the switch

    return REPLAY


class ShardCore:
    """State of one ``__consumer_offsets`` partition plus record/reply/timer primitives."""

    def __init__(
        self,
        partition: int,
        config: CoordinatorConfig,
        timer: Timer,
        member_id_factory: MemberIdFactory = default_member_id,
    ) -> None:
        self.partition = partition
        self.config = config
        self.timer = timer
        self.new_member_id = member_id_factory
        self.hard = HardState()
        #: the group types of the shard (:mod:`.family`), set by the shard
        self.families: tuple[GroupFamily, ...] = ()
        #: the cluster's topics as the edge last reported them (consumer groups read it)
        self.topics: TopicsSnapshot = EMPTY_TOPICS
        self.groups: dict[str, Group] = {}
        self.deadlines: dict[TimerKey, int] = {}
        #: the job awaited per (kind, group): a completion of any other is ignored
        self.jobs: dict[tuple[JobKind, str], Job] = {}
        #: replies parked until the group's inline job completes
        self.waiting: dict[str, list[Waiting]] = {}
        self.now_ms = 0
        self._records: list[Record] = []
        self._replies: list[Reply] = []
        self.history = HistoryRecorder(self)
        self._jobs: list[Job] = []

    # ------------------------------------------------------------------ call framing

    def _begin(self, now_ms: int, trigger: object = None) -> None:
        """Start a call; ``trigger`` is what caused it (an event, a timer key, a load)."""
        self.now_ms = now_ms
        self._records = []
        self._replies = []
        self._jobs = []
        self.history.begin(trigger)

    def _end(self) -> Result:
        self.history.flush()
        result = Result(tuple(self._records), tuple(self._replies), tuple(self._jobs))
        self._records = []
        self._replies = []
        self._jobs = []
        return result

    # ------------------------------------------------------------------ records

    def write(self, key: RecordKey, value: RecordValue | None) -> None:
        self._records.append(Record(key, value, self.partition))
        self.history.observe(key, value)
        self.replay(key, value)

    def replay(self, key: RecordKey, value: RecordValue | None) -> None:
        """Apply one record to hard state (the shard's switch)."""
        self.hard.replay(key, value)

    def write_record(self, record: Record) -> None:
        """Append ``record`` as it is, unreplayed (a transactional offset is staged by its
        writer, :mod:`samsa.coordinator.txn_offsets`)."""
        self._records.append(record)

    def offsets_of(self, group_id: str) -> dict[TopicPartition, OffsetCommitValue]:
        return self.hard.offsets.get(group_id, {})

    def find_group(self, group_id: str) -> tuple[GroupFamily, OffsetsGroup] | None:
        """The group named ``group_id``, of whichever type, and its family."""
        for family in self.families:
            group = family.group(self, group_id)
            if group is not None:
                return family, group
        return None

    # ------------------------------------------------------------------ replies

    def reply(self, token: object, response: Response) -> None:
        self._replies.append(Reply(token, response))

    # ------------------------------------------------------------------ jobs

    def start_job(self, kind: JobKind, group_id: str, work: Callable[[], object],
                  offload: bool = True) -> Job:
        """Ask the edge for ``work`` (it goes out with this call's result) and await it:
        it replaces any job of the same kind and group awaited so far."""
        job = Job(self.partition, kind, group_id, work, offload)
        self.jobs[(kind, group_id)] = job
        self._jobs.append(job)
        return job

    def awaits(self, kind: JobKind, group_id: str) -> Job | None:
        return self.jobs.get((kind, group_id))

    def park(self, group_id: str, waiting: Waiting) -> None:
        self.waiting.setdefault(group_id, []).append(waiting)

    # ------------------------------------------------------------------ timers

    def key(self, kind: TimerKind, group_id: str = "", member_id: str = "") -> TimerKey:
        return TimerKey(self.partition, kind, group_id, member_id)

    def schedule(self, kind: TimerKind, group_id: str, member_id: str, delay_ms: int) -> None:
        key = self.key(kind, group_id, member_id)
        deadline = self.now_ms + max(delay_ms, 0)
        self.deadlines[key] = deadline
        self.timer.schedule(key, deadline)

    def cancel(self, kind: TimerKind, group_id: str, member_id: str = "") -> None:
        key = self.key(kind, group_id, member_id)
        if self.deadlines.pop(key, None) is not None:
            self.timer.cancel(key)

    def is_scheduled(self, kind: TimerKind, group_id: str, member_id: str = "") -> bool:
        return self.key(kind, group_id, member_id) in self.deadlines

    def cancel_group_timers(self, group_id: str) -> None:
        for key in [k for k in self.deadlines if k.group_id == group_id and k.group_id]:
            del self.deadlines[key]
            self.timer.cancel(key)
