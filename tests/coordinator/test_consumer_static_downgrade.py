"""A static member that restarts with the classic protocol, replacing the group's last
consumer-protocol member (same instance id), turns the consumer group back into a classic
group at once, Stable and without a rebalance (Kafka 4.x's
``validateOnlineDowngradeWithReplacedMember`` / ``convertToClassicGroup`` with a joining
member), on the fake clock."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E

from samsa.coordinator import CoordinatorConfig, GroupState

from .consumer_ctx import T1
from .test_consumer_migration import MCtx, Owned


def _mixed(ctx: MCtx) -> tuple[dict[str, str], Owned, int]:
    """Classic members a, b and the static consumer-protocol member c (instance "i"), all
    reconciled; returns the classic ids, what c holds, and the group epoch."""
    ids = ctx.classic_group({"a": {"t1": {0, 1}}, "b": {"t1": {2}}})
    assert ctx.hb("c", 0, instance_id="i").error_code == E.none
    for _ in range(4):
        for mid in ids.values():
            joined = ctx.cjoin(mid, ctx_owned(ctx, mid))
            ctx.csync(mid, joined.generation_id)
        c = ctx.member("c")
        ctx.hb("c", c.member_epoch, instance_id="i", owned=dict(c.assigned))
    c = ctx.member("c")
    group = ctx.cgroup()
    assert c.member_epoch == group.epoch == group.assignment_epoch and c.assigned
    assert all(m.member_epoch == group.epoch for m in group.members.values())
    held = {"t1": set(c.assigned[T1])}
    ctx.step_check()
    return ids, held, group.epoch


def ctx_owned(ctx: MCtx, member_id: str) -> Owned:
    assigned = ctx.member(member_id).assigned
    return {"t1": set(assigned[T1])} if T1 in assigned else {}


def test_static_classic_member_replacing_the_last_consumer_member_downgrades() -> None:
    ctx = MCtx()
    ids, held, epoch = _mixed(ctx)
    joined = ctx.cjoin("", held, instance_id="i")  # c restarted with a classic client
    assert joined.error_code == E.none and joined.member_id != "c"
    assert (joined.generation_id, joined.protocol_name, joined.leader) == (epoch, "range", "")
    assert "g" not in ctx.shard().hard.consumer.groups
    assert ctx.state() is GroupState.STABLE  # no rebalance: every member keeps its partitions
    described = ctx.describe()
    assert described.summary.generation == epoch
    assert set(described.member_ids) == {*ids.values(), joined.member_id}
    new = next(m for m in described.members if m.member_id == joined.member_id)
    assert new.group_instance_id == "i"
    assert ctx.csync(joined.member_id, joined.generation_id) == (E.none, held)
    for mid in ids.values():  # the others go on heartbeating the classic group
        assert ctx.chb(mid, epoch) == E.none
    ctx.step_check()


def test_no_downgrade_when_the_policy_forbids_it() -> None:
    ctx = MCtx(CoordinatorConfig(offsets_topic_num_partitions=1,
                                 consumer_migration_policy="upgrade"))
    _ids, held, _epoch = _mixed(ctx)
    joined = ctx.cjoin("", held, instance_id="i")
    assert joined.error_code == E.none
    group = ctx.cgroup()  # still a consumer group, now of classic members only
    assert joined.member_id in group.members and "c" not in group.members
    assert all(m.classic is not None for m in group.members.values())
    ctx.step_check()


def test_no_downgrade_while_another_consumer_member_remains() -> None:
    ctx = MCtx()
    _ids, held, _epoch = _mixed(ctx)
    assert ctx.hb("d", 0).error_code == E.none  # a second consumer-protocol member
    joined = ctx.cjoin("", held, instance_id="i")
    assert joined.error_code == E.none
    group = ctx.cgroup()
    assert joined.member_id in group.members and group.members["d"].classic is None
    ctx.step_check()


def test_a_classic_member_replacing_a_classic_member_is_no_downgrade_trigger() -> None:
    """Only the replacement of a consumer-protocol member converts (Kafka checks the
    replaced member): a static classic member rejoining beside consumer members stays."""
    ctx = MCtx()
    ids = ctx.classic_group({"a": {"t1": {0, 1, 2}}})
    assert ctx.hb("c", 0).error_code == E.none
    first = ctx.cjoin("", {}, instance_id="s")  # a static classic member joins...
    assert first.error_code == E.none
    again = ctx.cjoin("", {}, instance_id="s")  # ...and restarts
    assert again.error_code == E.none and again.member_id != first.member_id
    group = ctx.cgroup()
    assert group.members["c"].classic is None and again.member_id in group.members
    assert ids
    ctx.step_check()
