"""When a consumer group's target assignment is computed (KIP-1263: batched, offloaded).

Kafka 4.3 computes a group's next target at most once per ``consumer.assignment.interval.ms``
(``group.consumer.assignment.interval.ms``, default 1000 ms; 0 computes at once), counted
from when the last computation finished (the target metadata record's timestamp). samsa
never runs the assignor on a request: :func:`request_target` hands the edge a job
(:class:`~.target.TargetWork`) once the interval has passed, or arms the group's
``TimerKind.CONSUMER_ASSIGNMENT`` timer for when it will, and only one job per group is
awaited at a time. Meanwhile every heartbeat is answered from the current target, and
members reconcile towards it (a member joining a new group gets epoch 1 and nothing, as
KAFKA-20268 has it).

With ``consumer.assignor.offload.enable`` (``group.consumer.assignor.offload.enable``,
default true) the job runs in the edge's background worker; a later heartbeat carries its
target. Without, the edge runs it at once, before anything else of the shard, and the
heartbeat that asked for it is parked on it (:class:`~samsa.coordinator.jobs.Waiting`) and
answered with the new target, as Kafka 4.3 answers when it assigns inline.

:func:`target_done` takes the outcome: it is written only if the group is still at the
epoch, with the members, it was computed for (Kafka's rule); otherwise, or after a failure
(retried after :data:`RETRY_MS`), the group asks again. Every path that can leave the group
epoch above the assignment epoch (a heartbeat, a leave, a fenced member, a regex resolved,
a shard loaded) calls :func:`request_target`, so no target is ever waited for forever.
"""

from __future__ import annotations

from samsa.coordinator.consumer import regex_refresh
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.consumer.target import TargetWork, is_current, target_work, write_target
from samsa.coordinator.core import ShardCore
from samsa.coordinator.jobs import Job, JobFailed, JobKind
from samsa.coordinator.timers import TimerKind

#: a target computation that raised is tried again this much later
RETRY_MS = 1000

TARGET = JobKind.TARGET_ASSIGNMENT


def request_target(core: ShardCore, group: ConsumerGroup) -> Job | None:
    """Ask for the group's next target if it needs one: the job started now, or None (no
    target needed, one awaited already, or the timer armed for the end of the interval)."""
    gid = group.group_id
    if group.epoch <= group.assignment_epoch or not group.members:
        core.cancel(TimerKind.CONSUMER_ASSIGNMENT, gid)
        return None
    if core.awaits(TARGET, gid) is not None:
        return None  # its completion asks again if the group moved on meanwhile
    due = max(group.assignment_timestamp + core.config.consumer_assignment_interval_for(gid),
              group.retry_at)
    if core.now_ms < due:
        key = core.key(TimerKind.CONSUMER_ASSIGNMENT, gid)
        if core.deadlines.get(key) != due:
            core.schedule(TimerKind.CONSUMER_ASSIGNMENT, gid, "", due - core.now_ms)
        return None
    core.cancel(TimerKind.CONSUMER_ASSIGNMENT, gid)
    return core.start_job(TARGET, gid, target_work(core, group),
                          offload=core.config.consumer_assignor_offload_for(gid))


def interval_elapsed(core: ShardCore, group_id: str) -> None:
    """``TimerKind.CONSUMER_ASSIGNMENT`` fired."""
    group = core.hard.consumer.groups.get(group_id)
    if group is not None:
        request_target(core, group)


def target_done(core: ShardCore, job: Job, outcome: object) -> None:
    """The awaited target job finished: write its target if it is still current, ask again
    if the group needs another, and answer the replies parked on it."""
    gid = job.group_id
    waiting = core.waiting.pop(gid, [])
    group = core.hard.consumer.groups.get(gid)
    if group is not None:
        work = job.work
        assert isinstance(work, TargetWork)
        if isinstance(outcome, JobFailed):
            group.retry_at = core.now_ms + RETRY_MS
        elif is_current(work, group):
            assert isinstance(outcome, dict)
            write_target(core, group, work.epoch, outcome)
        again = request_target(core, group)
        regex_refresh.asked_meanwhile(core, group)
        if waiting and again is not None and not again.offload:
            core.waiting[gid] = waiting  # answered when that one lands
            return
    for parked in waiting:
        core.reply(parked.token, parked.answer())


def arm_loaded(core: ShardCore) -> None:
    """After a load: every group still waiting for a target asks for it (at once, or when
    its interval from the recorded timestamp has passed)."""
    for group in core.hard.consumer.groups.values():
        request_target(core, group)
