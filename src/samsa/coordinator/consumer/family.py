"""The consumer (KIP-848) group type's part of a shard (:class:`~..family.GroupFamily`):
ConsumerGroupHeartbeat and ConsumerGroupDescribe, the classic APIs on consumer groups
(:mod:`.interop`), the consumer timers and the background jobs (target assignments, regex
resolutions) its groups ask for."""

from __future__ import annotations

from collections.abc import Mapping

from samsa.coordinator import queries
from samsa.coordinator.consumer import batching, describe, heartbeat, interop, regex_refresh
from samsa.coordinator.consumer.describe import CONSUMER_GROUP_TYPE
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.consumer.records import (
    CONSUMER_KEY_TYPES,
    ConsumerRecordKey,
    ConsumerRecordValue,
)
from samsa.coordinator.core import HardState, ShardCore
from samsa.coordinator.events import (
    ConsumerGroupDescribe,
    ConsumerGroupHeartbeat,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    SyncGroup,
)
from samsa.coordinator.family import CommitCheck, Handler, OffsetsGroup
from samsa.coordinator.jobs import Job, JobKind
from samsa.coordinator.timers import TimerKey, TimerKind

_HOME: dict[type, Handler] = {
    ConsumerGroupHeartbeat: heartbeat.handle_heartbeat,
    ConsumerGroupDescribe: describe.handle_describe,
}


class ConsumerFamily:
    group_type = CONSUMER_GROUP_TYPE
    key_types: tuple[type, ...] = CONSUMER_KEY_TYPES
    handlers: Mapping[type, Handler] = {
        **_HOME,
        JoinGroup: interop.join,
        SyncGroup: interop.sync,
        Heartbeat: interop.heartbeat_,
        LeaveGroup: interop.leave,
    }
    home_apis: Mapping[type, Handler] = _HOME
    timer_kinds = frozenset({
        TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REBALANCE, TimerKind.CONSUMER_JOIN,
        TimerKind.CONSUMER_SYNC, TimerKind.CONSUMER_ASSIGNMENT,
    })
    job_kinds = frozenset({JobKind.TARGET_ASSIGNMENT, JobKind.REGEX_RESOLUTION})
    #: an emptied consumer group waits for the expiry sweep (Kafka 4.x)
    removes_emptied_group = False

    def replay(self, hard: HardState, key: ConsumerRecordKey,
               value: ConsumerRecordValue | None) -> None:
        hard.consumer.replay(key, value)

    def group(self, core: ShardCore, group_id: str) -> ConsumerGroup | None:
        return core.hard.consumer.groups.get(group_id)

    def groups(self, core: ShardCore) -> list[OffsetsGroup]:
        return list(core.hard.consumer.groups.values())

    def summary(self, core: ShardCore, group: ConsumerGroup) -> queries.GroupSummary:
        return queries.consumer_summary(core, group)

    def describe(self, core: ShardCore, group: ConsumerGroup) -> queries.GroupDescription:
        return queries.describe_consumer(core, group)

    def forget(self, core: ShardCore, group: ConsumerGroup) -> None:
        """Its timers; the group itself goes with the replay of its epoch tombstone."""
        core.cancel_group_timers(group.group_id)

    def commit_accepted(self, core: ShardCore, group: ConsumerGroup, check: CommitCheck) -> None:
        """A commit is not a heartbeat here."""

    def loaded(self, core: ShardCore) -> None:
        """The groups are live already: they are built by replaying their records."""

    def started(self, core: ShardCore) -> None:
        heartbeat.arm_loaded_timers(core)

    def unloaded(self, core: ShardCore) -> None:
        """Nothing is parked on a consumer group outside ``core.waiting``."""

    def fire(self, core: ShardCore, key: TimerKey) -> None:
        if key.kind is TimerKind.CONSUMER_REBALANCE:
            heartbeat.rebalance_expired(core, key.group_id, key.member_id)
        elif key.kind is TimerKind.CONSUMER_ASSIGNMENT:
            batching.interval_elapsed(core, key.group_id)
        else:  # the session, or a classic member's JoinGroup / SyncGroup deadline
            heartbeat.session_expired(core, key.group_id, key.member_id)

    def complete(self, core: ShardCore, job: Job, outcome: object) -> None:
        """The job the shard awaited finished (:mod:`samsa.coordinator.jobs`)."""
        if job.kind is JobKind.TARGET_ASSIGNMENT:
            batching.target_done(core, job, outcome)
            return
        group = core.hard.consumer.groups.get(job.group_id)
        if group is None:
            return
        if regex_refresh.resolved(core, group, job, outcome):
            heartbeat.bump_epoch(core, group, True)
        batching.request_target(core, group)
