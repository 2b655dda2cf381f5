"""KIP-1263 on the fake clock: target assignments are background jobs, at most one per
group per ``consumer.assignment.interval.ms``; heartbeats meanwhile answer from the current
target; a job that comes back stale, late, twice, failed, or after a reload changes nothing
it should not; new groups start at epoch 1 (KAFKA-20268)."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode as E

from samsa.coordinator import ConsumerGroupHeartbeat, CoordinatorConfig, TimerKind
from samsa.coordinator.consumer.batching import RETRY_MS
from samsa.coordinator.consumer.group import ConsumerGroupState
from samsa.coordinator.consumer.records import (
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from samsa.coordinator.jobs import Job, JobFailed, JobKind
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse

from .consumer_ctx import T1, T2, CCtx, as_dict

TARGET = JobKind.TARGET_ASSIGNMENT


def _ctx(interval: int = 1000, offload: bool = True, hold: bool = True,
         **kw: object) -> CCtx:
    ctx = CCtx(CoordinatorConfig(offsets_topic_num_partitions=1,
                                 consumer_assignment_interval_ms=interval,
                                 consumer_assignor_offload_enable=offload, **kw),  # type: ignore[arg-type]
               hold_jobs=hold)
    ctx.sleep(100_000)  # a clock well past 0 (0 is "never computed" in the records)
    return ctx


def _targets(ctx: CCtx) -> list[Job]:
    return [j for j in ctx.held if j.kind is TARGET]


def _assignment_records(ctx: CCtx) -> list[ConsumerGroupTargetAssignmentMetadataValue]:
    return [r.value for r in ctx.records
            if isinstance(r.key, ConsumerGroupTargetAssignmentMetadataKey)
            and isinstance(r.value, ConsumerGroupTargetAssignmentMetadataValue)]


def test_heartbeats_answer_from_the_current_target_while_its_job_runs() -> None:
    """KAFKA-20268: a member joining a new group reconciles to epoch 1 (an empty target)
    while epoch 2's target is computed; only one job is awaited however often it asks."""
    ctx = _ctx()
    r = ctx.hb("a", 0, names=("t1", "t2"))
    assert (r.error_code, r.member_epoch, as_dict(r.assignment)) == (0, 1, {})
    group = ctx.cgroup()
    assert (group.epoch, group.assignment_epoch, group.state) == \
        (2, 1, ConsumerGroupState.ASSIGNING)
    (job,) = _targets(ctx)
    for _ in range(3):
        assert ctx.hb("a", 1).member_epoch == 1
    assert len(_targets(ctx)) == 1
    ctx.complete(job)
    assert _assignment_records(ctx) == [ConsumerGroupTargetAssignmentMetadataValue(2, ctx.now)]
    r = ctx.hb("a", 1)
    assert (r.member_epoch, as_dict(r.assignment)) == (2, {T1: {0, 1, 2}, T2: {0, 1}})
    assert ctx.cgroup().state is ConsumerGroupState.STABLE


def test_at_most_one_target_per_assignment_interval() -> None:
    """Joins within the interval after a computation wait for its end (the group's keyed
    timer): then one job computes the target for all of them."""
    ctx = _ctx(interval=1000)
    ctx.hb("a", 0)
    ctx.complete(_targets(ctx)[0])
    done = ctx.now
    ctx.sleep(100)
    ctx.hb("b", 0)
    ctx.sleep(100)
    ctx.hb("c", 0)
    assert _targets(ctx) == []
    deadline = ctx.timer.deadlines[ctx.shard().key(TimerKind.CONSUMER_ASSIGNMENT, "g")]
    assert deadline == done + 1000
    ctx.sleep(799)
    assert _targets(ctx) == []
    ctx.sleep(1)  # the interval has passed: the timer asks, without any heartbeat
    (job,) = _targets(ctx)
    assert set(job.work.spec.members) == {"a", "b", "c"}  # type: ignore[attr-defined]
    ctx.complete(job)
    assert [v.assignment_epoch for v in _assignment_records(ctx)] == [2, 4]
    ctx.settle({"a": {T1: {0, 1, 2}}, "b": {}, "c": {}})
    assert len(ctx.owners()) == 3 and ctx.cgroup().state is ConsumerGroupState.STABLE


def test_interval_0_and_no_offload_is_kafka_43_inline_assignment() -> None:
    """With ``consumer.assignor.offload.enable=false`` the job runs at once and the
    heartbeat that asked for it is answered from the new target (parked until then)."""
    ctx = _ctx(interval=0, offload=False, hold=False)
    event = ConsumerGroupHeartbeat("g", "a", 0, rebalance_timeout_ms=30_000,
                                   subscribed_topic_names=("t1",), topic_partitions=())
    result = ctx.coord.handle(event, ctx.now, "token")  # as the edge: not completed yet
    assert result.replies == () and len(result.jobs) == 1 and not result.jobs[0].offload
    done = ctx.coord.complete(result.jobs[0], result.jobs[0].run(), ctx.now)
    (reply,) = done.replies
    assert reply.token == "token"
    assert isinstance(reply.response, ConsumerGroupHeartbeatResponse)
    assert reply.response.member_epoch == 2
    assert as_dict(reply.response.assignment) == {T1: {0, 1, 2}}
    ctx.absorb(result)  # the records, for the replay check
    ctx.records.extend(done.records)


def test_unload_answers_a_parked_heartbeat() -> None:
    ctx = _ctx(interval=0, offload=False, hold=False)
    event = ConsumerGroupHeartbeat("g", "a", 0, rebalance_timeout_ms=30_000,
                                   subscribed_topic_names=("t1",), topic_partitions=())
    result = ctx.coord.handle(event, ctx.now, "token")
    (job,) = result.jobs
    unloaded = ctx.coord.unload(0)
    (reply,) = unloaded.replies
    assert isinstance(reply.response, ConsumerGroupHeartbeatResponse)
    assert (reply.token, reply.response.error_code) == ("token", E.not_coordinator)
    assert ctx.coord.complete(job, job.run(), ctx.now).replies == ()  # ignored: unloaded
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now))


def test_a_stale_target_is_dropped_and_asked_for_again() -> None:
    """Kafka's rule: a target computed for an epoch the group has left is not written."""
    ctx = _ctx(interval=0)
    ctx.hb("a", 0)
    (first,) = _targets(ctx)
    ctx.hb("b", 0)  # epoch 3 while epoch 2's job runs: no second job meanwhile
    assert _targets(ctx) == [first]
    ctx.complete(first)
    assert _assignment_records(ctx) == []
    (second,) = _targets(ctx)
    assert second.work.epoch == 3  # type: ignore[attr-defined]
    ctx.complete(second)
    assert [v.assignment_epoch for v in _assignment_records(ctx)] == [3]
    assert set(ctx.cgroup().target) == {"a", "b"}


def test_a_replaced_static_member_makes_a_target_stale() -> None:
    """A static member rejoining under a new member id keeps the epoch, not the member
    ids: a target computed before names a member that is gone."""
    ctx = _ctx(interval=0, hold=False)
    ctx.hb("a", 0, instance_id="i")
    ctx.hb("b", 0)
    ctx.settle({"a": as_dict(ctx.hb("a", ctx.member("a").member_epoch, full=True,
                                     instance_id="i").assignment), "b": {}})
    ctx.hold_jobs = True
    ctx.hb("c", 0)
    (job,) = _targets(ctx)
    ctx.hb("a", -2, instance_id="i")
    ctx.hb("a2", 0, instance_id="i")
    epoch = ctx.cgroup().epoch
    ctx.complete(job)
    assert ctx.cgroup().assignment_epoch < epoch  # not written
    (again,) = _targets(ctx)
    assert set(again.work.spec.members) == {"a2", "b", "c"}  # type: ignore[attr-defined]
    ctx.run_jobs()
    assert set(ctx.cgroup().target) == {"a2", "b", "c"}


def test_late_and_duplicate_completions_are_ignored() -> None:
    ctx = _ctx(interval=0)
    ctx.hb("a", 0)
    (job,) = _targets(ctx)
    ctx.complete(job)
    before = len(ctx.records)
    assert ctx.coord.complete(job, job.run(), ctx.now).records == ()  # twice
    assert len(ctx.records) == before


def test_a_reloaded_shard_asks_again_and_ignores_what_it_asked_before() -> None:
    """A job of a shard that was unloaded and loaded again (a hand-off, a failed append)
    never lands there; the loaded shard asks for the target it still needs."""
    ctx = _ctx(interval=0)
    ctx.hb("a", 0)
    (old,) = _targets(ctx)
    ctx.held.clear()
    ctx.absorb(ctx.coord.unload(0))
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now))
    (new,) = _targets(ctx)
    assert new is not old and new.work.epoch == 2  # type: ignore[attr-defined]
    assert ctx.coord.complete(old, old.run(), ctx.now).records == ()
    ctx.complete(new)
    assert ctx.cgroup().assignment_epoch == 2


def test_a_reload_keeps_the_interval_of_the_recorded_timestamp() -> None:
    ctx = _ctx(interval=5000)
    ctx.hb("a", 0)
    ctx.complete(_targets(ctx)[0])
    done = ctx.now
    ctx.sleep(1000)
    ctx.hb("b", 0)
    ctx.absorb(ctx.coord.unload(0))
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now))
    assert ctx.cgroup().assignment_timestamp == done
    assert _targets(ctx) == []
    assert ctx.timer.deadlines[ctx.shard().key(TimerKind.CONSUMER_ASSIGNMENT, "g")] == \
        done + 5000
    ctx.sleep(4000)
    assert len(_targets(ctx)) == 1


def test_a_failed_job_is_tried_again_later() -> None:
    ctx = _ctx(interval=0)
    ctx.hb("a", 0)
    (job,) = _targets(ctx)
    ctx.complete(job, JobFailed("boom"))
    assert _targets(ctx) == [] and ctx.cgroup().assignment_epoch == 1
    ctx.hb("a", 1)  # a heartbeat does not bring the retry forward
    assert _targets(ctx) == []
    ctx.sleep(RETRY_MS)
    ctx.run_jobs()
    assert ctx.cgroup().assignment_epoch == 2


def test_a_job_for_a_deleted_group_is_ignored() -> None:
    from samsa.coordinator import DeleteGroups

    ctx = _ctx(interval=0)
    ctx.hb("a", 0)
    (job,) = _targets(ctx)
    ctx.hb("a", -1)
    ctx.call(DeleteGroups(("g",)))
    assert "g" not in ctx.shard().hard.consumer.groups
    ctx.complete(job)
    assert "g" not in ctx.shard().hard.consumer.groups


def test_the_last_member_leaving_catches_the_assignment_epoch_up() -> None:
    """KAFKA-20442: an empty group's assignment epoch equals its group epoch."""
    ctx = _ctx(interval=0, hold=False)
    ctx.hb("a", 0)
    ctx.hb("a", -1)
    group = ctx.cgroup()
    assert group.epoch == group.assignment_epoch == 3 and group.state is \
        ConsumerGroupState.EMPTY


def test_group_configs_override_the_interval_and_the_offload() -> None:
    overrides: dict[str, dict[str, int]] = {
        "g": {"consumer.assignment.interval.ms": 0, "consumer.assignor.offload.enable": 0}}

    def lookup(group_id: str) -> Mapping[str, int]:
        return overrides.get(group_id, {})

    ctx = _ctx(interval=15_000, group_configs=lookup)
    ctx.hb("x", 0, group_id="h")  # the broker's settings: offloaded, once per 15 s
    (job,) = _targets(ctx)
    assert job.offload
    ctx.complete(job)
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    assert _targets(ctx) == []  # g's computed inline and at once
    assert ctx.cgroup().assignment_epoch == ctx.cgroup().epoch == 3
    ctx.hb("y", 0, group_id="h")
    assert _targets(ctx) == [] and ctx.cgroup("h").epoch > ctx.cgroup("h").assignment_epoch


# ---------------------------------------------------------------------- regexes


def test_a_literal_topic_first_then_the_regex_topics_in_a_later_epoch() -> None:
    """What clients observe with Kafka: a member subscribing to a regex and a topic name
    is assigned the named topic first; the regex, resolved in the background, adds its
    topics in a later epoch."""
    ctx = _ctx(interval=0)
    r = ctx.hb("a", 0, names=("t1",), regex="t2")
    assert (r.member_epoch, as_dict(r.assignment)) == (1, {})
    # the regex waits for the target job asked for meanwhile (else it would make it stale)
    assert [j.kind for j in ctx.held] == [TARGET]
    ctx.complete(_targets(ctx)[0])
    assert [j.kind for j in ctx.held] == [JobKind.REGEX_RESOLUTION]
    r = ctx.hb("a", 1)
    assert (r.member_epoch, as_dict(r.assignment)) == (2, {T1: {0, 1, 2}})
    (regex_job,) = ctx.held
    ctx.complete(regex_job)
    assert ctx.cgroup().regexes["t2"].topics == {"t2"} and ctx.cgroup().epoch == 3
    ctx.run_jobs()
    r = ctx.hb("a", 2)
    assert (r.member_epoch, as_dict(r.assignment)) == (3, {T1: {0, 1, 2}, T2: {0, 1}})


def test_one_resolution_at_a_time_and_none_for_a_regex_dropped_meanwhile() -> None:
    ctx = _ctx(interval=0, hold=True)
    ctx.hb("a", 0, names=(), regex="t.*")
    ctx.run_jobs()
    ctx.hb("b", 0, names=(), regex="t1")  # within 10 s of a's resolution: waits
    assert [j for j in ctx.held if j.kind is JobKind.REGEX_RESOLUTION] == []
    ctx.sleep(10_001)
    ctx.hb("b", ctx.member("b").member_epoch)
    (job,) = [j for j in ctx.held if j.kind is JobKind.REGEX_RESOLUTION]
    assert job.work.regexes == ("t.*", "t1")  # type: ignore[attr-defined]
    ctx.hb("c", 0, names=(), regex="t2")  # one resolution at a time
    assert [j for j in ctx.held if j.kind is JobKind.REGEX_RESOLUTION] == [job]
    ctx.hb("b", -1)  # b's regex is gone before its resolution lands
    ctx.complete(job)
    assert set(ctx.cgroup().regexes) == {"t.*"}
    ctx.run_jobs()
    ctx.sleep(10_001)
    ctx.hb("c", ctx.member("c").member_epoch)  # t2 is still unresolved: resolved now
    ctx.run_jobs()
    assert set(ctx.cgroup().regexes) == {"t.*", "t2"}
