"""Static membership (group.instance.id)."""

from __future__ import annotations

from samsa.coordinator import GroupState, LeaveGroup, LeavingMember

from .harness import SUB, Ctx

S = GroupState
FENCED = 82


def static_group(ctx: Ctx, *instances: str) -> tuple[list[str], int]:
    tokens = [ctx.join(instance_id=i, client_id=i) for i in instances]
    ctx.sleep_until(lambda: all(ctx.reply(t) for t in tokens))
    replies = [ctx.join_reply(t) for t in tokens]
    ids = [r.member_id for r in replies]
    gen, leader = replies[0].generation_id, replies[0].leader
    for m in ids:
        if m != leader:
            ctx.sync(m, gen)
    ctx.sync(leader, gen, tuple((m, m.encode()) for m in ids))
    assert ctx.state() is S.STABLE
    return ids, gen


def test_static_member_ids_use_the_instance_id() -> None:
    ctx = Ctx()
    (a,), _ = static_group(ctx, "ia")
    assert a == "ia-1"


def test_static_restart_in_stable_fences_old_id_without_rebalance() -> None:
    ctx = Ctx()
    (a, b), gen = static_group(ctx, "ia", "ib")
    before = len(ctx.records)
    r = ctx.join_reply(ctx.join(instance_id="ib", client_id="ib"))
    new_b = r.member_id
    assert new_b != b
    assert (r.error_code, r.generation_id, r.skip_assignment, r.leader) == (0, gen, False, a)
    assert ctx.state() is S.STABLE
    assert len(ctx.records) == before + 1  # the group record with the new member id
    assert ctx.shard().hard.groups["g"].members[1].member_id == new_b
    assert ctx.reply(ctx.heartbeat(b, gen, instance_id="ib")).error_code == FENCED  # type: ignore[union-attr]
    assert ctx.reply(ctx.heartbeat(new_b, gen, instance_id="ib")).error_code == 0  # type: ignore[union-attr]
    assert ctx.sync_reply(ctx.sync(new_b, gen, instance_id="ib")).assignment == b.encode()
    ctx.check_replay()


def test_static_leader_restart_v9_skips_assignment() -> None:
    ctx = Ctx()
    (_a, b), _gen = static_group(ctx, "ia", "ib")
    r = ctx.join_reply(ctx.join(instance_id="ia", client_id="ia"))
    assert r.skip_assignment is True
    assert r.leader == r.member_id
    assert {m.member_id for m in r.members} == {r.member_id, b}
    assert ctx.state() is S.STABLE


def test_static_leader_restart_before_v9_gets_old_leader_id() -> None:
    ctx = Ctx()
    (a, _b), _ = static_group(ctx, "ia", "ib")
    r = ctx.join_reply(ctx.join(instance_id="ia", client_id="ia", supports_skip_assignment=False))
    assert (r.skip_assignment, r.leader, r.members) == (False, a, ())
    assert r.member_id != a
    assert ctx.describe().summary.leader == r.member_id


def test_static_restart_with_protocol_change_rebalances() -> None:
    ctx = Ctx()
    t = ctx.join(instance_id="ia", client_id="ia", protocols=(("range", SUB), ("rr", SUB)))
    ctx.sleep(3000)
    r = ctx.join_reply(t)
    ctx.sync(r.member_id, r.generation_id)
    assert ctx.state() is S.STABLE
    t = ctx.join(instance_id="ia", client_id="ia", protocols=(("rr", SUB), ("range", SUB)))
    # a rebalance: the lone member has rejoined, so it completes at once
    assert ctx.state() is S.COMPLETING_REBALANCE
    assert ctx.join_reply(t).generation_id == r.generation_id + 1
    assert ctx.join_reply(t).protocol_name == "rr"


def test_static_replacement_while_preparing_fences_parked_join() -> None:
    ctx = Ctx()
    (a, b), _ = static_group(ctx, "ia", "ib")
    tb_old = ctx.join(b, instance_id="ib", protocols=(("range", b"\x00\x00\x00\x00\x00\x00"),))
    assert ctx.state() is S.PREPARING_REBALANCE
    tb_new = ctx.join(instance_id="ib", client_id="ib")
    assert ctx.join_reply(tb_old).error_code == FENCED
    assert ctx.reply(tb_new) is None
    ta = ctx.join(a, instance_id="ia")
    assert ctx.join_reply(tb_new).error_code == 0
    assert ctx.join_reply(ta).leader == a


def test_static_replacement_while_completing_fences_parked_sync_and_rebalances() -> None:
    ctx = Ctx()
    (a, b), gen = static_group(ctx, "ia", "ib")
    ta = ctx.join(a, instance_id="ia")
    assert ctx.state() is S.PREPARING_REBALANCE
    tb = ctx.join(b, instance_id="ib")
    gen2 = ctx.join_reply(tb).generation_id
    assert ctx.join_reply(ta).generation_id == gen2 == gen + 1
    ts = ctx.sync(b, gen2, instance_id="ib")
    ctx.join(instance_id="ib", client_id="ib")
    assert ctx.sync_reply(ts).error_code == FENCED
    assert ctx.state() is S.PREPARING_REBALANCE


def test_wrong_member_id_for_instance_is_fenced() -> None:
    ctx = Ctx()
    (a, _b), gen = static_group(ctx, "ia", "ib")
    assert ctx.join_reply(ctx.join(a, instance_id="ib")).error_code == FENCED
    assert ctx.sync_reply(ctx.sync(a, gen, instance_id="ib")).error_code == FENCED
    r = ctx.reply(ctx.commit({("t", 0): 1}, a, gen, instance_id="ib"))
    assert r.topics[0].partitions[0].error_code == FENCED  # type: ignore[union-attr]


def test_leave_by_instance_id() -> None:
    ctx = Ctx()
    (_a, b), _ = static_group(ctx, "ia", "ib")
    t = ctx.call(LeaveGroup("g", (LeavingMember("", "ib"), LeavingMember("", "nope"))))
    r = ctx.reply(t)
    assert [m.error_code for m in r.members] == [0, 25]  # type: ignore[union-attr]
    assert b not in ctx.describe().member_ids
    assert ctx.state() is S.PREPARING_REBALANCE


def test_static_member_survives_session_expiry_only_until_timeout() -> None:
    ctx = Ctx()
    (a, b), gen = static_group(ctx, "ia", "ib")
    for _ in range(3):
        ctx.sleep(3000)
        ctx.heartbeat(a, gen, instance_id="ia")
    ctx.sleep(1000)
    assert b not in ctx.describe().member_ids  # static members also time out
    assert ctx.state() is S.PREPARING_REBALANCE
