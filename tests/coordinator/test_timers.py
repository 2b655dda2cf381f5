"""Every coordinator timer on the fake clock."""

from __future__ import annotations

from samsa.coordinator import GroupState, TimerKey, TimerKind

from .harness import Ctx

S = GroupState
UNKNOWN_MEMBER = 25
REBALANCING = 27


# ---------------------------------------------------------------------- initial delay


def test_initial_delay_holds_the_first_join() -> None:
    ctx = Ctx()
    _, t = ctx.join_new()
    ctx.sleep(2999)
    assert ctx.reply(t) is None
    ctx.sleep(1)
    r = ctx.join_reply(t)
    assert (r.error_code, r.generation_id, ctx.now) == (0, 1, 3000)
    ctx.check_replay()


def test_initial_delay_extends_while_members_arrive_up_to_rebalance_timeout() -> None:
    ctx = Ctx()
    tokens = [ctx.join_new(rebalance_ms=10_000)[1]]
    for at in (1000, 4000, 7000, 9500):
        ctx.sleep(at - ctx.now)
        tokens.append(ctx.join_new(rebalance_ms=10_000)[1])
    ctx.sleep(499)  # t = 9999
    assert all(ctx.reply(t) is None for t in tokens)
    ctx.sleep(1)  # t = 10000: 3000 + 3000 + 3000 + 1000
    replies = [ctx.join_reply(t) for t in tokens]
    assert {r.generation_id for r in replies} == {1}
    assert sum(1 for r in replies if r.members) == 1  # only the leader sees the members
    assert len(next(r for r in replies if r.members).members) == 5


def test_initial_delay_without_new_members_is_not_extended() -> None:
    ctx = Ctx()
    _, t1 = ctx.join_new()
    ctx.sleep(3000)
    assert ctx.join_reply(t1).generation_id == 1


def test_no_extension_once_the_group_had_a_generation() -> None:
    ctx = Ctx()
    ids, _ = ctx.stable_group(1)
    ctx.leave(*ids)
    assert ctx.state() is S.EMPTY
    start = ctx.now
    _, t1 = ctx.join_new()
    ctx.sleep(1000)
    _, t2 = ctx.join_new()
    ctx.sleep(2000)
    assert ctx.now - start == 3000
    assert ctx.join_reply(t1).generation_id == ctx.join_reply(t2).generation_id == 3


# ---------------------------------------------------------------------- rebalance timeout


def test_rebalance_timeout_drops_dynamic_members_that_did_not_rejoin() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    t = ctx.join(a)
    start = ctx.now
    while ctx.now - start < 30_000 - 3000:
        ctx.sleep(3000)
        assert ctx.reply(ctx.heartbeat(b, gen)).error_code == REBALANCING  # type: ignore[union-attr]
    assert ctx.reply(t) is None
    ctx.sleep(30_000 - (ctx.now - start))
    r = ctx.join_reply(t)
    assert (r.generation_id, r.leader, [m.member_id for m in r.members]) == (gen + 1, a, [a])
    assert ctx.reply(ctx.heartbeat(b, gen)).error_code == UNKNOWN_MEMBER  # type: ignore[union-attr]
    ctx.check_replay()


def test_rebalance_timeout_keeps_static_members_and_reelects_leader() -> None:
    ctx = Ctx()
    ta = ctx.join(instance_id="ia", session_ms=60_000)
    tb = ctx.join(instance_id="ib", session_ms=60_000)
    ctx.sleep_until(lambda: ctx.reply(tb) is not None)
    a, b = ctx.join_reply(ta).member_id, ctx.join_reply(tb).member_id
    ctx.sync(b, 1)
    ctx.sync(a, 1, ((a, b"A"), (b, b"B")))
    assert ctx.state() is S.STABLE
    t = ctx.join(b, instance_id="ib", session_ms=60_000)  # follower rejoins, leader a does not
    assert ctx.state() is S.STABLE  # unchanged follower in Stable: answered at once
    assert ctx.join_reply(t).generation_id == 1
    t = ctx.join(b, instance_id="ib", protocols=(("range", b"\x00\x00\x00\x00\x00\x00"),))
    assert ctx.state() is S.PREPARING_REBALANCE
    ctx.sleep(30_000)
    r = ctx.join_reply(t)
    assert r.leader == b  # the leader did not rejoin: leadership moved to a rejoined member
    assert {m.member_id for m in r.members} == {a, b}  # static a kept


# ---------------------------------------------------------------------- session timeout


def test_session_timeout_removes_silent_member_and_rebalances() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    for _ in range(3):
        ctx.sleep(3000)
        ctx.heartbeat(a, gen)
    # b's last heartbeat was its sync at the start
    assert ctx.state() is S.STABLE
    ctx.sleep(1000)  # b's session (10 s) expires
    assert ctx.state() is S.PREPARING_REBALANCE
    assert ctx.reply(ctx.heartbeat(b, gen)).error_code == UNKNOWN_MEMBER  # type: ignore[union-attr]
    t = ctx.join(a)
    r = ctx.join_reply(t)
    assert [m.member_id for m in r.members] == [a]
    ctx.check_replay()


def test_heartbeat_resets_session_deadline() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    for _ in range(10):
        ctx.sleep(9000)
        assert ctx.reply(ctx.heartbeat(a, gen)).error_code == 0  # type: ignore[union-attr]
    assert ctx.state() is S.STABLE


def test_new_member_join_times_out_after_five_minutes() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    ctx.join(a, rebalance_ms=600_000, session_ms=10_000)
    ctx.sync(a, gen)  # a's join completes alone at once; sync makes it Stable
    # the lone leader's rejoin completes at once; now start a long rebalance
    t_new = ctx.join(require_known_member_id=False, rebalance_ms=600_000)
    assert ctx.state() is S.PREPARING_REBALANCE
    while ctx.now < 300_000 + 10_000:
        ctx.sleep(3000)
        ctx.heartbeat(a, ctx.describe().summary.generation)
        if ctx.reply(t_new) is not None:
            break
    assert ctx.join_reply(t_new).error_code == UNKNOWN_MEMBER


# ---------------------------------------------------------------------- pending members


def test_pending_member_expires_after_session_timeout() -> None:
    ctx = Ctx()
    ctx.stable_group(1)
    r = ctx.join_reply(ctx.join())
    assert r.error_code == 79
    pending = r.member_id
    assert pending in ctx.describe().pending_members
    ctx.sleep(10_000)
    assert pending not in ctx.describe().pending_members
    assert ctx.join_reply(ctx.join(pending)).error_code == UNKNOWN_MEMBER


def test_pending_member_blocks_early_join_completion_until_it_expires() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    ctx.sleep(1000)
    assert ctx.join_reply(ctx.join()).error_code == 79  # pending, no rebalance yet
    assert ctx.state() is S.STABLE
    ctx.sleep(1000)
    t = ctx.join(a)  # leader rejoins: everyone joined, but a member id is pending
    assert ctx.reply(t) is None
    ctx.sleep(8999)
    assert ctx.reply(t) is None
    ctx.sleep(1)  # the pending member's session timeout (10 s) passes
    assert ctx.join_reply(t).generation_id == gen + 1


# ---------------------------------------------------------------------- pending sync


def test_member_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    ta, tb = ctx.join(a), ctx.join(b)
    gen2 = ctx.join_reply(ta).generation_id
    assert ctx.join_reply(tb).generation_id == gen2 == gen + 1
    ctx.sync(a, gen2, ((a, b"A"), (b, b"B")))
    assert ctx.state() is S.STABLE
    for _ in range(9):
        ctx.sleep(3000)
        ctx.heartbeat(a, gen2)
        ctx.heartbeat(b, gen2)
    assert ctx.state() is S.STABLE
    ctx.sleep(3000)  # 30 s rebalance timeout since the join completed
    assert ctx.state() is S.PREPARING_REBALANCE
    assert b not in ctx.describe().member_ids
    ctx.check_replay()


def test_leader_that_never_syncs_is_removed_and_parked_syncs_get_rebalance_in_progress() -> None:
    ctx = Ctx()
    (a, b), _gen = ctx.stable_group(2)
    ta, tb = ctx.join(a), ctx.join(b)
    gen2 = ctx.join_reply(ta).generation_id
    ts = ctx.sync(b, gen2)
    assert ctx.reply(ts) is None
    for _ in range(9):
        ctx.sleep(3000)
        ctx.heartbeat(a, gen2)  # the leader stays alive but never syncs
    ctx.sleep(3000)
    assert ctx.sync_reply(ts).error_code == REBALANCING
    assert a not in ctx.describe().member_ids
    assert ctx.state() is S.PREPARING_REBALANCE
    assert ctx.reply(tb) is not None


# ---------------------------------------------------------------------- stale fires


def test_stale_or_early_fire_is_ignored() -> None:
    ctx = Ctx()
    (a,), _gen = ctx.stable_group(1)
    key = TimerKey(0, TimerKind.SESSION, "g", a)
    assert ctx.coord.fire(key, ctx.now).records == ()
    assert ctx.state() is S.STABLE
    assert ctx.coord.fire(TimerKey(0, TimerKind.SESSION, "g", "nobody"), 10**9).replies == ()
