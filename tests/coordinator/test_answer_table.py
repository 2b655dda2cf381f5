"""One test per (state x request) cell of the answer table in ``samsa.coordinator.state``.

A request to a Dead group cannot happen in samsa (a group that dies is dropped within the
same call, and an unloaded shard answers NOT_COORDINATOR); the Dead column is Kafka's answer
when a request races with the group's removal, checked here by putting a Dead group in place.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from samsa.coordinator import DeleteGroups, GroupState
from samsa.coordinator.responses import (
    DeleteGroupsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    OffsetCommitResponse,
    Response,
    SyncGroupResponse,
)
from tests.coordinator.subscriptions import encode_subscription

from .harness import Ctx

S = GroupState
NONE, UNKNOWN_MEMBER, REBALANCING, NOT_AVAILABLE = 0, 25, 27, 15
NON_EMPTY, NOT_FOUND = 68, 69
PARKED = "parked"


class Fixture:
    """A group in a given state: members a (leader), b, c."""

    def __init__(self, state: GroupState) -> None:
        self.ctx = ctx = Ctx()
        ids, gen = ctx.stable_group(3)
        self.a, self.b, self.c = ids
        self.gen = gen
        if state is S.EMPTY:
            ctx.leave(*ids)
            self.gen += 1
        elif state is S.PREPARING_REBALANCE:
            ctx.join(self.a)  # leader rejoins: b and c still missing
        elif state is S.COMPLETING_REBALANCE:
            for m in ids:
                ctx.join(m)
            self.gen += 1
        elif state is S.DEAD:
            ctx.shard().groups["g"].state = S.DEAD
        assert ctx.state() is state


def outcome(ctx: Ctx, token: int) -> tuple[object, GroupState]:
    r = ctx.reply(token)
    return (PARKED if r is None else _error(r)), ctx.state()


def _error(r: Response) -> int:
    if isinstance(r, JoinGroupResponse | SyncGroupResponse | HeartbeatResponse):
        return r.error_code
    if isinstance(r, OffsetCommitResponse):
        (code,) = {p.error_code for t in r.topics for p in t.partitions}
        return code
    if isinstance(r, DeleteGroupsResponse):
        return r.groups[0].error_code
    raise AssertionError(r)


Cell = Callable[[Fixture], int]


def new_member_join(f: Fixture) -> int:
    return f.ctx.join(require_known_member_id=False)


def known_member_join(f: Fixture) -> int:
    return f.ctx.join(f.b)


def known_member_join_changed(f: Fixture) -> int:
    return f.ctx.join(f.b, protocols=(("range", encode_subscription(["t", "u"])),))


def leader_join(f: Fixture) -> int:
    return f.ctx.join(f.a)


def follower_sync(f: Fixture) -> int:
    return f.ctx.sync(f.b, f.gen)


def leader_sync(f: Fixture) -> int:
    return f.ctx.sync(f.a, f.gen, ((f.a, b"A"),))


def heartbeat(f: Fixture) -> int:
    return f.ctx.heartbeat(f.b, f.gen)


def commit(f: Fixture) -> int:
    if f.ctx.state() is S.EMPTY:
        return f.ctx.commit({("t", 0): 1})
    return f.ctx.commit({("t", 0): 1}, f.b, f.gen)


def delete(f: Fixture) -> int:
    return f.ctx.call(DeleteGroups(("g",)))


TABLE: dict[tuple[str, GroupState], tuple[Cell, tuple[object, GroupState]]] = {
    # JoinGroup, new member
    ("join-new", S.EMPTY): (new_member_join, (PARKED, S.PREPARING_REBALANCE)),
    ("join-new", S.PREPARING_REBALANCE): (new_member_join, (PARKED, S.PREPARING_REBALANCE)),
    ("join-new", S.COMPLETING_REBALANCE): (new_member_join, (PARKED, S.PREPARING_REBALANCE)),
    ("join-new", S.STABLE): (new_member_join, (PARKED, S.PREPARING_REBALANCE)),
    ("join-new", S.DEAD): (new_member_join, (NOT_AVAILABLE, S.DEAD)),
    # JoinGroup, known member
    ("join-known", S.EMPTY): (known_member_join, (UNKNOWN_MEMBER, S.EMPTY)),
    ("join-known", S.PREPARING_REBALANCE): (
        known_member_join,
        (PARKED, S.PREPARING_REBALANCE),
    ),
    ("join-known-same", S.COMPLETING_REBALANCE): (
        known_member_join,
        (NONE, S.COMPLETING_REBALANCE),
    ),
    ("join-known-changed", S.COMPLETING_REBALANCE): (
        known_member_join_changed,
        (PARKED, S.PREPARING_REBALANCE),
    ),
    ("join-leader", S.STABLE): (leader_join, (PARKED, S.PREPARING_REBALANCE)),
    ("join-known-changed", S.STABLE): (
        known_member_join_changed,
        (PARKED, S.PREPARING_REBALANCE),
    ),
    ("join-follower-same", S.STABLE): (known_member_join, (NONE, S.STABLE)),
    ("join-known", S.DEAD): (known_member_join, (NOT_AVAILABLE, S.DEAD)),
    # SyncGroup
    ("sync", S.EMPTY): (follower_sync, (UNKNOWN_MEMBER, S.EMPTY)),
    ("sync", S.PREPARING_REBALANCE): (follower_sync, (REBALANCING, S.PREPARING_REBALANCE)),
    ("sync-follower", S.COMPLETING_REBALANCE): (
        follower_sync,
        (PARKED, S.COMPLETING_REBALANCE),
    ),
    ("sync-leader", S.COMPLETING_REBALANCE): (leader_sync, (NONE, S.STABLE)),
    ("sync", S.STABLE): (follower_sync, (NONE, S.STABLE)),
    ("sync", S.DEAD): (follower_sync, (NOT_AVAILABLE, S.DEAD)),
    # Heartbeat
    ("heartbeat", S.EMPTY): (heartbeat, (UNKNOWN_MEMBER, S.EMPTY)),
    ("heartbeat", S.PREPARING_REBALANCE): (heartbeat, (REBALANCING, S.PREPARING_REBALANCE)),
    ("heartbeat", S.COMPLETING_REBALANCE): (heartbeat, (NONE, S.COMPLETING_REBALANCE)),
    ("heartbeat", S.STABLE): (heartbeat, (NONE, S.STABLE)),
    ("heartbeat", S.DEAD): (heartbeat, (NOT_AVAILABLE, S.DEAD)),
    # OffsetCommit
    ("commit", S.EMPTY): (commit, (NONE, S.EMPTY)),
    ("commit", S.PREPARING_REBALANCE): (commit, (NONE, S.PREPARING_REBALANCE)),
    ("commit", S.COMPLETING_REBALANCE): (commit, (REBALANCING, S.COMPLETING_REBALANCE)),
    ("commit", S.STABLE): (commit, (NONE, S.STABLE)),
    ("commit", S.DEAD): (commit, (NOT_AVAILABLE, S.DEAD)),
    # DeleteGroups
    ("delete", S.EMPTY): (delete, (NONE, S.DEAD)),
    ("delete", S.PREPARING_REBALANCE): (delete, (NON_EMPTY, S.PREPARING_REBALANCE)),
    ("delete", S.COMPLETING_REBALANCE): (delete, (NON_EMPTY, S.COMPLETING_REBALANCE)),
    ("delete", S.STABLE): (delete, (NON_EMPTY, S.STABLE)),
    ("delete", S.DEAD): (delete, (NOT_FOUND, S.DEAD)),
}


@pytest.mark.parametrize(
    ("request_kind", "state"), list(TABLE), ids=[f"{k}-{s.value}" for k, s in TABLE]
)
def test_answer_table(request_kind: str, state: GroupState) -> None:
    cell, expected = TABLE[(request_kind, state)]
    f = Fixture(state)
    token = cell(f)
    assert outcome(f.ctx, token) == expected
    if state is not S.DEAD:
        f.ctx.check_replay()


def test_completing_known_member_same_metadata_gets_current_generation() -> None:
    f = Fixture(S.COMPLETING_REBALANCE)
    r = f.ctx.join_reply(leader_join(f))
    assert (r.generation_id, r.leader, len(r.members)) == (f.gen, f.a, 3)
    r = f.ctx.join_reply(known_member_join(f))
    assert (r.generation_id, r.leader, r.members) == (f.gen, f.a, ())


def test_completing_leader_sync_answers_every_parked_sync() -> None:
    f = Fixture(S.COMPLETING_REBALANCE)
    tb = f.ctx.sync(f.b, f.gen)
    tc = f.ctx.sync(f.c, f.gen)
    assert f.ctx.reply(tb) is None
    ta = f.ctx.sync(f.a, f.gen, ((f.a, b"A"), (f.b, b"B")))
    assert f.ctx.sync_reply(ta).assignment == b"A"
    assert f.ctx.sync_reply(tb).assignment == b"B"
    assert f.ctx.sync_reply(tc).assignment == b""  # missing from the leader's assignment
    assert f.ctx.sync_reply(tc).error_code == NONE


def test_stable_sync_returns_current_assignment() -> None:
    f = Fixture(S.STABLE)
    r = f.ctx.sync_reply(f.ctx.sync(f.b, f.gen))
    assert (r.error_code, r.assignment, r.protocol_type, r.protocol_name) == (
        NONE,
        f.b.encode(),
        "consumer",
        "range",
    )


class TestNonexistentGroup:
    def test_join_with_member_id(self) -> None:
        ctx = Ctx()
        assert ctx.join_reply(ctx.join("ghost")).error_code == UNKNOWN_MEMBER

    def test_sync_and_heartbeat(self) -> None:
        ctx = Ctx()
        assert ctx.sync_reply(ctx.sync("ghost", 1)).error_code == UNKNOWN_MEMBER
        hb = ctx.reply(ctx.heartbeat("ghost", 1))
        assert hb == HeartbeatResponse(UNKNOWN_MEMBER)

    def test_leave(self) -> None:
        from samsa.coordinator.responses import LeaveGroupMemberResponse, LeaveGroupResponse

        ctx = Ctx()
        assert ctx.reply(ctx.leave("ghost")) == LeaveGroupResponse(
            NONE, (LeaveGroupMemberResponse("ghost", None, UNKNOWN_MEMBER),)
        )

    def test_commit_creates_simple_group(self) -> None:
        ctx = Ctx()
        assert outcome(ctx, ctx.commit({("t", 0): 5})) == (NONE, S.EMPTY)
        ctx.check_replay()

    def test_commit_with_generation_is_illegal(self) -> None:
        ctx = Ctx()
        assert outcome(ctx, ctx.commit({("t", 0): 5}, "m", 3)) == (22, S.DEAD)

    def test_describe_and_delete(self) -> None:
        from samsa.coordinator import DescribeGroups
        from samsa.coordinator.responses import DescribedGroup, DescribeGroupsResponse

        ctx = Ctx()
        assert ctx.reply(ctx.call(DescribeGroups(("g",)))) == DescribeGroupsResponse(
            (DescribedGroup("g", NONE, "Dead"),)
        )
        assert outcome(ctx, ctx.call(DeleteGroups(("g",)))) == (NOT_FOUND, S.DEAD)
