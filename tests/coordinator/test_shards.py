"""Loading, unloading, reloading by replay, snapshots and multi-shard routing."""

from __future__ import annotations

from samsa.coordinator import (
    Coordinator,
    CoordinatorConfig,
    DeleteGroups,
    GroupState,
    ListGroups,
    ShardStatus,
    partition_for,
)
from samsa.coordinator.responses import HeartbeatResponse, ListGroupsResponse
from tests.coordinator.fake_timer import FakeTimer

from .harness import Ctx

S = GroupState
LOADING, NOT_COORDINATOR = 14, 16


def test_loading_shard_answers_load_in_progress_with_kafka_quirks() -> None:
    ctx = Ctx()
    shard = ctx.coord.begin_load(0)
    assert shard.status is ShardStatus.LOADING
    assert ctx.coord.coordinator_error("g") == LOADING
    assert ctx.join_reply(ctx.join()).error_code == LOADING
    assert ctx.reply(ctx.heartbeat("m", 1)) == HeartbeatResponse(0)
    assert ctx.sync_reply(ctx.sync("m", 1)).error_code == 27
    r = ctx.reply(ctx.call(ListGroups()))
    assert isinstance(r, ListGroupsResponse) and r.error_code == LOADING
    ctx.absorb(ctx.coord.finish_load(0, ctx.now))
    assert ctx.coord.coordinator_error("g") == 0


def test_unload_answers_parked_requests_and_cancels_timers() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    ta = ctx.join(a)
    assert ctx.reply(ta) is None
    ctx.absorb(ctx.coord.unload(0))
    assert ctx.join_reply(ta).error_code == NOT_COORDINATOR
    assert not [k for k in ctx.timer.deadlines if k.partition == 0]
    assert ctx.reply(ctx.heartbeat(b, gen)).error_code == NOT_COORDINATOR  # type: ignore[union-attr]
    assert ctx.coord.coordinator_error("g") == NOT_COORDINATOR


def test_unload_answers_parked_syncs() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    ctx.join(a)
    ctx.join(b)
    ts = ctx.sync(b, gen + 1)
    ctx.absorb(ctx.coord.unload(0))
    assert ctx.sync_reply(ts).error_code == NOT_COORDINATOR


def test_reload_from_log_restores_groups_and_offsets() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    ctx.commit({("t", 0): 11}, a, gen)
    live = ctx.shard().hard
    ctx.absorb(ctx.coord.unload(0))
    ctx.absorb(ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now))
    shard = ctx.shard()
    assert shard.hard == live
    group = ctx.describe()
    assert (group.summary.state, group.summary.generation, group.summary.leader) == (
        S.STABLE, gen, a)
    assert {m.member_id: m.assignment for m in group.members} == {a: a.encode(), b: b.encode()}
    assert ctx.reply(ctx.heartbeat(b, gen)).error_code == 0  # type: ignore[union-attr]
    # session timers restart at load: a silent member is dropped after its session timeout
    for _ in range(3):
        ctx.sleep(3000)
        ctx.heartbeat(b, gen)
    ctx.sleep(1000)
    assert a not in shard.groups["g"].members


def test_loaded_group_over_capacity_rebalances() -> None:
    ctx = Ctx()
    ctx.stable_group(3)
    records = [(r.key, r.value) for r in ctx.records]
    small = Ctx(CoordinatorConfig(offsets_topic_num_partitions=1, max_size=2), partitions=[])
    small.records.extend(ctx.records)
    small.absorb(small.coord.load(0, records, 0))
    assert small.state() is S.PREPARING_REBALANCE


def test_groups_spread_over_shards_and_records_carry_their_partition() -> None:
    config = CoordinatorConfig(offsets_topic_num_partitions=8)
    ctx = Ctx(config)
    groups = ["alpha", "beta", "gamma", "delta"]
    for g in groups:
        ctx.commit({("t", 0): 1}, group_id=g)
    assert {r.partition for r in ctx.records} == {partition_for(g, 8) for g in groups}
    assert len({partition_for(g, 8) for g in groups}) > 1
    before = len(ctx.records)
    ctx.call(DeleteGroups(tuple(groups)))
    assert sorted(r.partition for r in ctx.records[before:]) == sorted(
        partition_for(g, 8) for g in groups
    )
    ctx.check_replay()


def test_nothing_assumes_one_node_owns_every_shard() -> None:
    timer = FakeTimer()
    coord = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=4), timer)
    owned = partition_for("alpha", 4)
    coord.load(owned, [], 0)
    assert coord.coordinator_error("alpha") == 0
    other = next(g for g in ("beta", "gamma", "delta", "x", "y") if partition_for(g, 4) != owned)
    assert coord.coordinator_error(other) == NOT_COORDINATOR
    r = coord.handle(ListGroups(), 0, "t").replies[0].response
    assert r == ListGroupsResponse(0, ())
