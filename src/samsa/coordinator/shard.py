"""One coordinator shard: the groups of one ``__consumer_offsets`` partition.

Lifecycle: a shard starts LOADING; the edge feeds it the partition's log with
:meth:`CoordinatorShard.replay` and calls :meth:`finish_load` (ACTIVE). :meth:`unload`
answers parked requests with NOT_COORDINATOR and makes the shard UNLOADED.

The shard holds its group types side by side (:data:`FAMILIES`, :mod:`.family`): a request
naming a group goes to the family of the group's type, else to the API's home family; the
offsets APIs and DescribeGroups, ListGroups, DeleteGroups serve every type through the group
interface; timers and jobs go to the family owning their kind.

Per call (``handle``, ``fire``, ``complete``) the shard returns a :class:`Result`. The edge
appends ``records`` to this partition, then delivers ``replies`` and starts ``jobs``
(:mod:`.jobs`), whose outcomes come back through :meth:`CoordinatorShard.complete`. When an
append fails, the edge unloads the shard, loads it again from the log, and answers every
request of the lost result with an error. Calls for one shard must be serialised, including
the append.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from samsa.coordinator import admin, offsets, txn_offsets
from samsa.coordinator.answers import group_ids, invalid_group_id, status_error_response
from samsa.coordinator.classic_family import ClassicFamily
from samsa.coordinator.config import CoordinatorConfig
from samsa.coordinator.consumer.family import ConsumerFamily
from samsa.coordinator.core import (
    HardState,
    MemberIdFactory,
    Replayer,
    ShardCore,
    default_member_id,
)
from samsa.coordinator.events import (
    DeleteGroups,
    DescribeGroups,
    Event,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    TxnOffsetCommit,
)
from samsa.coordinator.family import GroupFamily, Handler
from samsa.coordinator.history.model import HistoryKey, LoadInfo
from samsa.coordinator.history.recorder import UNLOAD
from samsa.coordinator.jobs import Job
from samsa.coordinator.records import OffsetCommitKey, RecordKey, RecordValue
from samsa.coordinator.result import EMPTY_RESULT, Result
from samsa.coordinator.share.family import ShareFamily
from samsa.coordinator.timers import Timer, TimerKey, TimerKind

E = ErrorCode


class ShardStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADED = "unloaded"


#: The group types of a shard, side by side (:class:`~.family.GroupFamily`). A group type
#: is one more entry here; the first is the home of the APIs no other family claims.
FAMILIES: tuple[GroupFamily, ...] = (ClassicFamily(), ConsumerFamily(), ShareFamily())



def replay_switch(families: tuple[GroupFamily, ...]) -> dict[type, Replayer]:
    """Record key type -> who replays it (Kafka's ``GroupCoordinatorShard.replay``): each
    family its own record types; offsets and history are every type's."""
    switch: dict[type, Replayer] = {
        OffsetCommitKey: HardState.replay_offset,
        HistoryKey: HardState.replay_history,
    }
    for family in families:
        for key_type in family.key_types:
            switch[key_type] = family.replay
    return switch


#: the replay switch of :data:`FAMILIES`
REPLAY = replay_switch(FAMILIES)

#: APIs answered for every group type at once: through the group interface (offsets,
#: DeleteGroups) or from the read-only views (DescribeGroups, ListGroups).
_SHARED: dict[type, Handler] = {
    OffsetCommit: offsets.handle_commit,
    TxnOffsetCommit: txn_offsets.handle_commit,
    OffsetFetch: offsets.handle_fetch,
    OffsetDelete: offsets.handle_offset_delete,
    DescribeGroups: admin.handle_describe,
    ListGroups: admin.handle_list,
    DeleteGroups: admin.handle_delete,
}


class CoordinatorShard(ShardCore):
    """Groups and committed offsets of ``__consumer_offsets`` partition ``partition``."""

    def __init__(
        self,
        partition: int,
        config: CoordinatorConfig | None = None,
        timer: Timer | None = None,
        member_id_factory: MemberIdFactory = default_member_id,
        families: tuple[GroupFamily, ...] = FAMILIES,
    ) -> None:
        super().__init__(
            partition, config or CoordinatorConfig(), timer or _NoTimer(), member_id_factory
        )
        self.families = families
        self._switch = REPLAY if families is FAMILIES else replay_switch(families)
        self.status = ShardStatus.LOADING
        self._home = {api: f for f in reversed(families) for api in f.home_apis}
        self._timer_owner = {kind: f for f in families for kind in f.timer_kinds}
        self._job_owner = {kind: f for f in families for kind in f.job_kinds}

    # ------------------------------------------------------------------ loading

    def replay(self, key: RecordKey, value: RecordValue | None) -> None:
        """Apply one record to hard state (loading, and each record written): the family
        of its type replays it."""
        self._switch[type(key)](self.hard, key, value)

    def load(self, records: Iterable[tuple[RecordKey, RecordValue | None]],
             now_ms: int, info: LoadInfo | None = None) -> Result:
        for key, value in records:
            self.replay(key, value)
        return self.finish_load(now_ms, info)

    def finish_load(self, now_ms: int, info: LoadInfo | None = None) -> Result:
        """Build live groups from hard state (each family's), start their timers and the
        offsets-expiry timer; note the load in the groups' history (``info``: when the edge
        began loading, the node and lease)."""
        if self.status is not ShardStatus.LOADING:
            raise RuntimeError(f"shard {self.partition} is {self.status.value}, not loading")
        info = info or LoadInfo(now_ms)
        self._begin(now_ms, info)
        for family in self.families:
            family.loaded(self)
        self.status = ShardStatus.ACTIVE
        self.history.loaded(info)
        for family in self.families:
            family.started(self)
        self._schedule_offsets_expiry()
        return self._end()

    def unload(self) -> Result:
        """Give the shard up: parked requests get NOT_COORDINATOR, groups become Dead, the
        jobs it awaited are forgotten (their completions will be ignored)."""
        self._begin(self.now_ms, UNLOAD)
        for waiting in [w for ws in self.waiting.values() for w in ws]:
            self.reply(waiting.token, status_error_response(waiting.event, E.not_coordinator))
        self.waiting.clear()
        self.jobs.clear()
        for family in self.families:
            family.unloaded(self)
        for key in list(self.deadlines):
            self.timer.cancel(key)
        self.deadlines.clear()
        self.hard = HardState()
        self.status = ShardStatus.UNLOADED
        return self._end()

    # ------------------------------------------------------------------ requests and timers

    def handle(self, event: Event, now_ms: int, reply_to: object = None) -> Result:
        """Handle one request; its reply is in the result now, or later if it is parked."""
        self._begin(now_ms, event)
        error = self._status_error(event)
        if error is not None:
            self.reply(reply_to, status_error_response(event, error))
        else:
            self._handler(event)(self, event, reply_to)
        return self._end()

    def _handler(self, event: Event) -> Handler:
        """By the group's type: the family holding the named group answers the APIs it
        answers for its groups; else the API's home family (which may create the group)."""
        shared = _SHARED.get(type(event))
        if shared is not None:
            return shared
        ids = group_ids(event)
        if len(ids) == 1:
            for family in self.families:
                if family.group(self, ids[0]) is not None:
                    handler = family.handlers.get(type(event))
                    if handler is not None:
                        return handler
                    break
        return self._home[type(event)].home_apis[type(event)]

    def _status_error(self, event: Event) -> int | None:
        ids = group_ids(event)
        if len(ids) == 1 and invalid_group_id(event, ids[0]):
            return E.invalid_group_id
        if self.status is ShardStatus.LOADING:
            return E.coordinator_load_in_progress
        if self.status is ShardStatus.UNLOADED:
            return E.not_coordinator
        return None

    def fire(self, key: TimerKey, now_ms: int) -> Result:
        """A timer expired. A stale fire is ignored; an early one arms the timer again, so
        a timer service whose clock runs a little ahead of ``now_ms`` cannot lose it."""
        deadline = self.deadlines.get(key)
        if self.status is not ShardStatus.ACTIVE or deadline is None:
            return EMPTY_RESULT
        if deadline > now_ms:
            self.timer.schedule(key, deadline)
            return EMPTY_RESULT
        del self.deadlines[key]
        self._begin(now_ms, key)
        if key.kind is TimerKind.OFFSETS_EXPIRY:
            offsets.expire_offsets(self)
            self._schedule_offsets_expiry()
        else:
            self._timer_owner[key.kind].fire(self, key)
        return self._end()

    def complete(self, job: Job, outcome: object, now_ms: int) -> Result:
        """A background job finished (:mod:`.jobs`): handled if it is the job this shard
        awaits, else ignored (late, duplicate, superseded, or from before a reload)."""
        if self.status is not ShardStatus.ACTIVE or self.awaits(job.kind, job.group_id) is not job:
            return EMPTY_RESULT
        del self.jobs[(job.kind, job.group_id)]
        self._begin(now_ms)
        self._job_owner[job.kind].complete(self, job, outcome)
        return self._end()

    def _schedule_offsets_expiry(self) -> None:
        self.schedule(
            TimerKind.OFFSETS_EXPIRY, "", "", self.config.offsets_retention_check_interval_ms
        )


class _NoTimer:
    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        pass

    def cancel(self, key: TimerKey) -> None:
        pass
