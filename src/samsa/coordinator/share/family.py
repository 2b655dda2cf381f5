"""The share (KIP-932) group type's part of a shard (:class:`~..family.GroupFamily`):
ShareGroupHeartbeat, ShareGroupDescribe, the offsets admin APIs' group step, the
refusals of the classic and consumer APIs naming a share group (Kafka's: a classic join is
INCONSISTENT_GROUP_PROTOCOL, the others GROUP_ID_NOT_FOUND; the offsets APIs are refused by
the group itself, :class:`.group.ShareGroup`), the member session timers."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from samsa.coordinator import queries
from samsa.coordinator.answers import error_response
from samsa.coordinator.core import HardState, ShardCore
from samsa.coordinator.events import (
    ConsumerGroupHeartbeat,
    Event,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    ShareGroupOffsetsChange,
    SyncGroup,
)
from samsa.coordinator.family import CommitCheck, Handler, OffsetsGroup
from samsa.coordinator.jobs import Job, JobKind
from samsa.coordinator.share import admin, describe, heartbeat
from samsa.coordinator.share.group import SHARE_GROUP_TYPE, ShareGroup
from samsa.coordinator.share.records import SHARE_KEY_TYPES, ShareRecordKey, ShareRecordValue
from samsa.coordinator.timers import TimerKey, TimerKind

E = ErrorCode


def _refuse(error: int) -> Handler:
    def refuse(core: ShardCore, event: Event, token: object) -> None:
        core.reply(token, error_response(event, error))
    return refuse


_HOME: dict[type, Handler] = {
    ShareGroupHeartbeat: heartbeat.handle_heartbeat,
    ShareGroupDescribe: describe.handle_describe,
    ShareGroupOffsetsChange: admin.handle_offsets_change,
}


class ShareFamily:
    group_type = SHARE_GROUP_TYPE
    key_types: tuple[type, ...] = SHARE_KEY_TYPES
    handlers: Mapping[type, Handler] = {
        **_HOME,
        JoinGroup: _refuse(E.inconsistent_group_protocol),
        SyncGroup: _refuse(E.group_id_not_found),
        Heartbeat: _refuse(E.group_id_not_found),
        LeaveGroup: _refuse(E.group_id_not_found),
        ConsumerGroupHeartbeat: _refuse(E.group_id_not_found),
    }
    home_apis: Mapping[type, Handler] = _HOME
    timer_kinds = frozenset({TimerKind.SHARE_SESSION})
    job_kinds: frozenset[JobKind] = frozenset()
    #: it has no offsets to delete
    removes_emptied_group = False

    def replay(self, hard: HardState, key: ShareRecordKey,
               value: ShareRecordValue | None) -> None:
        hard.share.replay(key, value)

    def group(self, core: ShardCore, group_id: str) -> ShareGroup | None:
        return core.hard.share.groups.get(group_id)

    def groups(self, core: ShardCore) -> list[OffsetsGroup]:
        return list(core.hard.share.groups.values())

    def summary(self, core: ShardCore, group: ShareGroup) -> queries.GroupSummary:
        return queries.share_summary(core, group)

    def describe(self, core: ShardCore, group: ShareGroup) -> queries.GroupDescription:
        return queries.describe_share(core, group)

    def forget(self, core: ShardCore, group: ShareGroup) -> None:
        """Its timers; the group itself goes with the replay of its epoch tombstone."""
        core.cancel_group_timers(group.group_id)

    def commit_accepted(self, core: ShardCore, group: ShareGroup, check: CommitCheck) -> None:
        """Never called: a share group refuses every commit."""

    def loaded(self, core: ShardCore) -> None:
        """The groups are live already: they are built by replaying their records."""

    def started(self, core: ShardCore) -> None:
        heartbeat.arm_loaded_timers(core)

    def unloaded(self, core: ShardCore) -> None:
        """Nothing is parked on a share group."""

    def fire(self, core: ShardCore, key: TimerKey) -> None:
        heartbeat.session_expired(core, key.group_id, key.member_id)

    def complete(self, core: ShardCore, job: Job, outcome: object) -> None:
        """A share group starts no jobs."""
