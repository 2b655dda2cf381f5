"""JoinGroup details: member ids, validation, protocol vote, leaders, group size."""

from __future__ import annotations

from samsa.coordinator import CoordinatorConfig, GroupState, LeaveGroup, LeavingMember
from samsa.coordinator.responses import LeaveGroupMemberResponse, LeaveGroupResponse
from tests.coordinator.subscriptions import encode_subscription

from .harness import SUB, Ctx

S = GroupState
MEMBER_ID_REQUIRED, INVALID_SESSION, INCONSISTENT, MAX_SIZE = 79, 26, 23, 81


def test_member_id_required_then_join_with_generated_id() -> None:
    ctx = Ctx()
    r = ctx.join_reply(ctx.join(client_id="app"))
    assert (r.error_code, r.member_id) == (MEMBER_ID_REQUIRED, "app-1")
    assert ctx.state() is S.EMPTY  # a pending member does not start a rebalance
    t = ctx.join("app-1", client_id="app")
    ctx.sleep(3000)
    r = ctx.join_reply(t)
    assert (r.error_code, r.member_id, r.leader, r.generation_id) == (0, "app-1", "app-1", 1)
    assert r.protocol_name == "range" and r.protocol_type == "consumer"


def test_old_clients_join_without_member_id_step() -> None:
    ctx = Ctx()
    t = ctx.join(require_known_member_id=False)
    assert ctx.reply(t) is None
    ctx.sleep(3000)
    assert ctx.join_reply(t).member_id == "c-1"


def test_session_timeout_bounds() -> None:
    ctx = Ctx()
    assert ctx.join_reply(ctx.join(session_ms=5999)).error_code == INVALID_SESSION
    assert ctx.join_reply(ctx.join(session_ms=1_800_001)).error_code == INVALID_SESSION
    assert ctx.join_reply(ctx.join(session_ms=6000)).error_code == MEMBER_ID_REQUIRED
    assert ctx.join_reply(ctx.join(session_ms=1_800_000)).error_code == MEMBER_ID_REQUIRED


def test_inconsistent_protocol_type_and_protocols() -> None:
    ctx = Ctx()
    ctx.stable_group(1)
    r = ctx.join_reply(ctx.join(protocol_type="connect"))
    assert r.error_code == INCONSISTENT
    r = ctx.join_reply(ctx.join(protocols=(("roundrobin", SUB),)))
    assert r.error_code == INCONSISTENT
    fresh = Ctx()
    assert fresh.join_reply(fresh.join(protocols=())).error_code == INCONSISTENT
    assert fresh.join_reply(fresh.join(protocol_type="")).error_code == INCONSISTENT


def test_protocol_vote() -> None:
    ctx = Ctx()
    prefs = [
        (("roundrobin", SUB), ("range", SUB)),
        (("roundrobin", SUB), ("range", SUB)),
        (("range", SUB), ("roundrobin", SUB), ("sticky", SUB)),
    ]
    tokens = [ctx.join_new(protocols=p)[1] for p in prefs]
    ctx.sleep_until(lambda: all(ctx.reply(t) for t in tokens))
    assert {ctx.join_reply(t).protocol_name for t in tokens} == {"roundrobin"}


def test_vote_only_among_protocols_every_member_supports() -> None:
    ctx = Ctx()
    prefs = [
        (("sticky", SUB), ("range", SUB)),
        (("sticky", SUB), ("range", SUB)),
        (("range", SUB),),
    ]
    tokens = [ctx.join_new(protocols=p)[1] for p in prefs]
    ctx.sleep_until(lambda: all(ctx.reply(t) for t in tokens))
    assert {ctx.join_reply(t).protocol_name for t in tokens} == {"range"}


def test_only_the_leader_gets_the_member_list() -> None:
    ctx = Ctx()
    ids, tokens = zip(*[ctx.join_new() for _ in range(3)], strict=True)
    ctx.sleep_until(lambda: all(ctx.reply(t) for t in tokens))
    replies = [ctx.join_reply(t) for t in tokens]
    assert replies[0].leader == ids[0]
    assert [m.member_id for m in replies[0].members] == list(ids)
    assert [m.metadata for m in replies[0].members] == [SUB] * 3
    assert replies[1].members == replies[2].members == ()
    assert {r.leader for r in replies} == {ids[0]}


def test_leader_reelected_when_leader_leaves_during_rebalance() -> None:
    ctx = Ctx()
    (a, b, c), gen = ctx.stable_group(3)
    ctx.join(a)
    tb = ctx.join(b)
    ctx.leave(a)
    assert ctx.reply(tb) is None  # c still missing
    tc = ctx.join(c)
    rb, rc = ctx.join_reply(tb), ctx.join_reply(tc)
    assert rb.leader == rc.leader == b
    assert {m.member_id for m in rb.members} == {b, c}
    assert rb.generation_id == gen + 1


def test_group_max_size() -> None:
    ctx = Ctx(CoordinatorConfig(offsets_topic_num_partitions=1, max_size=2))
    ctx.stable_group(2)
    r = ctx.join_reply(ctx.join())
    assert (r.error_code, r.member_id) == (MAX_SIZE, "")
    assert ctx.state() is S.STABLE


def test_group_max_size_while_preparing_counts_joined_members() -> None:
    ctx = Ctx(CoordinatorConfig(offsets_topic_num_partitions=1, max_size=1))
    _, t = ctx.join_new()
    r = ctx.join_reply(ctx.join(require_known_member_id=False))
    assert r.error_code == MAX_SIZE
    ctx.sleep(3000)
    assert ctx.join_reply(t).error_code == 0


def test_changed_metadata_in_stable_rebalances() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    new_sub = (("range", encode_subscription(["t", "u"])),)
    tb = ctx.join(b, protocols=new_sub)
    assert ctx.state() is S.PREPARING_REBALANCE
    ta = ctx.join(a)
    assert ctx.join_reply(ta).generation_id == gen + 1
    members = {m.member_id: m.metadata for m in ctx.join_reply(ta).members}
    assert members[b] == new_sub[0][1]
    assert ctx.join_reply(tb).generation_id == gen + 1


def test_duplicate_join_while_parked_answers_the_older_request() -> None:
    ctx = Ctx()
    (a, _b), _ = ctx.stable_group(2)
    t1 = ctx.join(a)
    t2 = ctx.join(a)
    assert ctx.join_reply(t1).error_code == 27
    assert ctx.reply(t2) is None


# ---------------------------------------------------------------------- leave


def test_leave_batch_and_per_member_errors() -> None:
    ctx = Ctx()
    (a, b, c), _ = ctx.stable_group(3)
    t = ctx.call(
        LeaveGroup("g", (LeavingMember(a), LeavingMember("nobody"), LeavingMember(b, "x")))
    )
    assert ctx.reply(t) == LeaveGroupResponse(
        0,
        (
            LeaveGroupMemberResponse(a, None, 0),
            LeaveGroupMemberResponse("nobody", None, 25),
            LeaveGroupMemberResponse(b, "x", 25),  # instance id unknown
        ),
    )
    assert ctx.state() is S.PREPARING_REBALANCE
    tc, tb = ctx.join(c), ctx.join(b)
    leader = ctx.join_reply(tb) if ctx.join_reply(tb).members else ctx.join_reply(tc)
    assert {m.member_id for m in leader.members} == {b, c}


def test_last_member_leaving_empties_the_group_and_writes_it() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    before = len(ctx.records)
    ctx.leave(a)
    assert ctx.state() is S.EMPTY
    assert len(ctx.records) == before + 1
    assert ctx.shard().hard.groups["g"].generation == gen + 1
    assert ctx.shard().hard.groups["g"].members == ()
    ctx.check_replay()


def test_pending_member_can_leave() -> None:
    ctx = Ctx()
    pending = ctx.join_reply(ctx.join()).member_id
    r = ctx.reply(ctx.leave(pending))
    assert r == LeaveGroupResponse(0, (LeaveGroupMemberResponse(pending, None, 0),))
    assert not ctx.describe().pending_members


def test_parked_join_of_leaving_member_gets_unknown_member_id() -> None:
    ctx = Ctx()
    (a, _b), _ = ctx.stable_group(2)
    ta = ctx.join(a)
    ctx.leave(a)
    r = ctx.join_reply(ta)
    assert (r.error_code, r.member_id) == (25, "")
