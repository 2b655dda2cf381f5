"""One coordinator shard: the groups of one ``__consumer_offsets`` partition.

Lifecycle: a shard starts LOADING; the edge feeds it the partition's log with
:meth:`CoordinatorShard.replay` and calls :meth:`finish_load` (ACTIVE). :meth:`unload`
answers parked requests with NOT_COORDINATOR and makes the shard UNLOADED.

Per call (``handle``, ``fire``, ``complete``) the shard returns a :class:`Result`. The edge
appends ``records`` to this partition, then delivers ``replies`` and starts ``jobs``
(:mod:`.jobs`), whose outcomes come back through :meth:`CoordinatorShard.complete`. When an
append fails, the edge unloads the shard, loads it again from the log, and answers every
request of the lost result with an error. Calls for one shard must be serialised, including
the append.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.coordinator import admin, heartbeat, join, offsets, sync
from samsa.coordinator import rebalance as rb
from samsa.coordinator.answers import group_ids, invalid_group_id, status_error_response
from samsa.coordinator.config import CoordinatorConfig
from samsa.coordinator.consumer import batching
from samsa.coordinator.consumer import heartbeat as consumer_heartbeat
from samsa.coordinator.consumer import interop as consumer
from samsa.coordinator.core import (
    HardState,
    MemberIdFactory,
    ShardCore,
    default_member_id,
)
from samsa.coordinator.events import (
    DeleteGroups,
    DescribeGroups,
    Event,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
)
from samsa.coordinator.group import Group
from samsa.coordinator.history.model import LoadInfo
from samsa.coordinator.history.recorder import UNLOAD
from samsa.coordinator.jobs import Job
from samsa.coordinator.records import (
    RecordKey,
    RecordValue,
)
from samsa.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from samsa.coordinator.result import EMPTY_RESULT, Result
from samsa.coordinator.share import dispatch as share
from samsa.coordinator.share import heartbeat as share_heartbeat
from samsa.coordinator.state import GroupState
from samsa.coordinator.timers import Timer, TimerKey, TimerKind

E = ErrorCode
S = GroupState


class ShardStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADED = "unloaded"


_HANDLERS: dict[type, Callable[[ShardCore, Any, object], None]] = {
    JoinGroup: join.handle_join,
    SyncGroup: sync.handle_sync,
    Heartbeat: heartbeat.handle_heartbeat,
    LeaveGroup: heartbeat.handle_leave,
    OffsetCommit: offsets.handle_commit,
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
    ) -> None:
        super().__init__(
            partition, config or CoordinatorConfig(), timer or _NoTimer(), member_id_factory
        )
        self.status = ShardStatus.LOADING

    # ------------------------------------------------------------------ loading

    def replay(self, key: RecordKey, value: RecordValue | None) -> None:
        """Apply one log record to hard state (while loading)."""
        self.hard.replay(key, value)

    def load(self, records: Iterable[tuple[RecordKey, RecordValue | None]],
             now_ms: int, info: LoadInfo | None = None) -> Result:
        for key, value in records:
            self.replay(key, value)
        return self.finish_load(now_ms, info)

    def finish_load(self, now_ms: int, info: LoadInfo | None = None) -> Result:
        """Build live groups from hard state (Stable with members, else Empty), start their
        session timers and the offsets-expiry timer; note the load in the groups' history
        (``info``: when the edge began loading, the node and lease)."""
        if self.status is not ShardStatus.LOADING:
            raise RuntimeError(f"shard {self.partition} is {self.status.value}, not loading")
        info = info or LoadInfo(now_ms)
        self._begin(now_ms, info)
        self.groups = {
            gid: Group.from_record(gid, self.hard.groups.get(gid)) for gid in self.hard.group_ids()
        }
        self.status = ShardStatus.ACTIVE
        self.history.loaded(info)
        for group in self.groups.values():
            if len(group.members) > self.config.max_size:
                rb.prepare_rebalance(self, group)
            for member in group.members.values():
                rb.schedule_heartbeat(self, group, member)
        consumer_heartbeat.arm_loaded_timers(self)
        share_heartbeat.arm_loaded_timers(self)
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
        for group in self.groups.values():
            for member in group.members.values():
                rb.answer_join(
                    core=self,
                    group=group,
                    member=member,
                    response=JoinGroupResponse(E.not_coordinator, member.member_id),
                )
                rb.answer_sync(self, member, SyncGroupResponse(E.not_coordinator))
            self.transition(group, S.DEAD)
        for key in list(self.deadlines):
            self.timer.cancel(key)
        self.deadlines.clear()
        self.groups.clear()
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
        elif not (share.dispatch(self, event, reply_to)
                  or consumer.dispatch(self, event, reply_to)):
            _HANDLERS[type(event)](self, event, reply_to)
        return self._end()

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
            consumer.expire_offsets(self)
            self._schedule_offsets_expiry()
            return self._end()
        if key.kind is TimerKind.CONSUMER_SESSION:
            consumer_heartbeat.session_expired(self, key.group_id, key.member_id)
            return self._end()
        if key.kind is TimerKind.SHARE_SESSION:
            share_heartbeat.session_expired(self, key.group_id, key.member_id)
            return self._end()
        if key.kind is TimerKind.CONSUMER_REBALANCE:
            consumer_heartbeat.rebalance_expired(self, key.group_id, key.member_id)
            return self._end()
        if key.kind in (TimerKind.CONSUMER_JOIN, TimerKind.CONSUMER_SYNC):
            consumer_heartbeat.session_expired(self, key.group_id, key.member_id)
            return self._end()
        if key.kind is TimerKind.CONSUMER_ASSIGNMENT:
            batching.interval_elapsed(self, key.group_id)
            return self._end()
        group = self.groups.get(key.group_id)
        if group is not None:
            self._fire_group_timer(group, key)
        return self._end()

    def complete(self, job: Job, outcome: object, now_ms: int) -> Result:
        """A background job finished (:mod:`.jobs`): handled if it is the job this shard
        awaits, else ignored (late, duplicate, superseded, or from before a reload)."""
        if self.status is not ShardStatus.ACTIVE or self.awaits(job.kind, job.group_id) is not job:
            return EMPTY_RESULT
        del self.jobs[(job.kind, job.group_id)]
        self._begin(now_ms)
        consumer.complete_job(self, job, outcome)
        return self._end()

    def _fire_group_timer(self, group: Group, key: TimerKey) -> None:
        if key.kind is TimerKind.INITIAL_REBALANCE_DELAY:
            rb.initial_delay_expired(self, group)
        elif key.kind is TimerKind.REBALANCE_TIMEOUT:
            if group.is_(S.PREPARING_REBALANCE):
                rb.complete_join(self, group)
        elif key.kind is TimerKind.SESSION:
            rb.session_expired(self, group, key.member_id)
        elif key.kind is TimerKind.PENDING_MEMBER:
            rb.remove_pending_member(self, group, key.member_id)
        elif key.kind is TimerKind.PENDING_SYNC:
            rb.pending_sync_expired(self, group)

    def _schedule_offsets_expiry(self) -> None:
        self.schedule(
            TimerKind.OFFSETS_EXPIRY, "", "", self.config.offsets_retention_check_interval_ms
        )


class _NoTimer:
    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        pass

    def cancel(self, key: TimerKey) -> None:
        pass
