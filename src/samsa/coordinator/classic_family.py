"""The classic group type's part of a shard (:class:`~.family.GroupFamily`): JoinGroup,
SyncGroup, Heartbeat and LeaveGroup (:mod:`.join`, :mod:`.sync`, :mod:`.heartbeat`), the
classic timers, loading live groups from the group metadata records and answering their
parked requests when the shard is given up."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from samsa.coordinator import heartbeat, join, queries, sync
from samsa.coordinator import rebalance as rb
from samsa.coordinator.core import HardState, ShardCore
from samsa.coordinator.events import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from samsa.coordinator.family import CommitCheck, Handler, OffsetsGroup
from samsa.coordinator.group import Group
from samsa.coordinator.jobs import Job, JobKind
from samsa.coordinator.records import GroupMetadataKey, GroupMetadataValue
from samsa.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from samsa.coordinator.state import GroupState
from samsa.coordinator.timers import TimerKey, TimerKind

E = ErrorCode
S = GroupState

_HANDLERS: dict[type, Handler] = {
    JoinGroup: join.handle_join,
    SyncGroup: sync.handle_sync,
    Heartbeat: heartbeat.handle_heartbeat,
    LeaveGroup: heartbeat.handle_leave,
}


class ClassicFamily:
    group_type = "classic"
    key_types: tuple[type, ...] = (GroupMetadataKey,)
    handlers: Mapping[type, Handler] = _HANDLERS
    home_apis: Mapping[type, Handler] = _HANDLERS
    timer_kinds = frozenset({
        TimerKind.INITIAL_REBALANCE_DELAY, TimerKind.REBALANCE_TIMEOUT, TimerKind.SESSION,
        TimerKind.PENDING_MEMBER, TimerKind.PENDING_SYNC,
    })
    job_kinds: frozenset[JobKind] = frozenset()
    #: as Kafka's ZooKeeper-era coordinator (``cleanupGroupMetadata`` after the deletion)
    removes_emptied_group = True

    def replay(self, hard: HardState, key: GroupMetadataKey,
               value: GroupMetadataValue | None) -> None:
        if value is None:
            hard.groups.pop(key.group, None)
        else:
            hard.groups[key.group] = value

    def group(self, core: ShardCore, group_id: str) -> Group | None:
        return core.groups.get(group_id)

    def groups(self, core: ShardCore) -> list[OffsetsGroup]:
        return list(core.groups.values())

    def summary(self, core: ShardCore, group: Group) -> queries.GroupSummary:
        return queries.summary(core, group)

    def describe(self, core: ShardCore, group: Group) -> queries.GroupDescription:
        return queries.describe_classic(core, group)

    def forget(self, core: ShardCore, group: Group) -> None:
        rb.remove_group(core, group)

    def commit_accepted(self, core: ShardCore, group: Group, check: CommitCheck) -> None:
        if check.renews is not None:
            rb.schedule_heartbeat(core, group, group.members[check.renews])

    def loaded(self, core: ShardCore) -> None:
        """Live groups from the metadata records (Stable with members, else Empty); their
        session timers; an oversized group rebalances."""
        core.groups = {
            gid: Group.from_record(gid, core.hard.groups.get(gid)) for gid in core.hard.group_ids()
        }

    def started(self, core: ShardCore) -> None:
        for group in core.groups.values():
            if len(group.members) > core.config.max_size:
                rb.prepare_rebalance(core, group)
            for member in group.members.values():
                rb.schedule_heartbeat(core, group, member)

    def unloaded(self, core: ShardCore) -> None:
        """Parked JoinGroup and SyncGroup requests get NOT_COORDINATOR; groups become Dead."""
        for group in core.groups.values():
            for member in group.members.values():
                rb.answer_join(core=core, group=group, member=member,
                               response=JoinGroupResponse(E.not_coordinator, member.member_id))
                rb.answer_sync(core, member, SyncGroupResponse(E.not_coordinator))
            rb.transition(core, group, S.DEAD)
        core.groups.clear()

    def fire(self, core: ShardCore, key: TimerKey) -> None:
        group = core.groups.get(key.group_id)
        if group is None:
            return
        if key.kind is TimerKind.INITIAL_REBALANCE_DELAY:
            rb.initial_delay_expired(core, group)
        elif key.kind is TimerKind.REBALANCE_TIMEOUT:
            if group.is_(S.PREPARING_REBALANCE):
                rb.complete_join(core, group)
        elif key.kind is TimerKind.SESSION:
            rb.session_expired(core, group, key.member_id)
        elif key.kind is TimerKind.PENDING_MEMBER:
            rb.remove_pending_member(core, group, key.member_id)
        elif key.kind is TimerKind.PENDING_SYNC:
            rb.pending_sync_expired(core, group)

    def complete(self, core: ShardCore, job: Job, outcome: object) -> None:
        pass
