"""The coordinator checked against the answer table of ``samsa.coordinator.state``.

``test_coordinator_follows_the_table`` drives a group in each state through every request
row of ``state.ANSWERS`` (several variants where a cell depends on the member or its
metadata) and compares what happened with what the cell says. ``test_kafka_answers`` pins
the outcomes to Kafka's, one per cell, so the table cannot drift from Kafka unnoticed.

A request to a Dead group cannot happen in samsa (a group that dies is dropped within the
same call, and an unloaded shard answers NOT_COORDINATOR); the Dead column is Kafka's answer
when a request races with the group's removal, checked here by putting a Dead group in place.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode

from samsa.coordinator import DeleteGroups, FetchTopic, GroupState, OffsetDelete
from samsa.coordinator.responses import (
    DeleteGroupsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    Response,
    SyncGroupResponse,
)
from samsa.coordinator.state import ANSWERS, Answer, Do, Request, answer, format_answers
from tests.coordinator.subscriptions import encode_subscription

from .harness import PROTOCOLS, SUB, Ctx

S = GroupState
E = ErrorCode
R = Request
NONE, UNKNOWN_MEMBER, REBALANCING, NOT_AVAILABLE = 0, 25, 27, 15
NON_EMPTY, NOT_FOUND = 68, 69
PARKED = "parked"
BOTH = (("range", SUB), ("roundrobin", SUB))
INSTANCES = ("ia", "ib", "ic")
BASELINE = {("t", 0): 1, ("u", 0): 1}


class Fixture:
    """A group in a given state: members a (leader), b, c; dynamic members on range, or
    static ones (``INSTANCES``) on range and roundrobin. With ``offsets``, the group
    committed ``BASELINE`` while Stable."""

    def __init__(self, state: GroupState, static: bool = False, offsets: bool = False) -> None:
        self.ctx = ctx = Ctx()
        self.protocols = BOTH if static else PROTOCOLS
        ids, gen = ctx.stable_group(3, instance_ids=INSTANCES if static else (),
                                    protocols=self.protocols)
        self.instance = dict(zip(ids, INSTANCES, strict=True)) if static else {}
        self.a, self.b, self.c = ids
        self.gen = gen
        if offsets:
            ctx.commit(BASELINE, self.a, gen)
        if state is S.EMPTY:
            ctx.leave(*ids)
            self.gen += 1
        elif state is S.PREPARING_REBALANCE:
            self.rejoin(self.a)  # leader rejoins: b and c still missing
        elif state is S.COMPLETING_REBALANCE:
            for m in ids:
                self.rejoin(m)
            self.gen += 1
        elif state is S.DEAD:
            ctx.force_dead()
        assert ctx.state() is state

    def rejoin(self, member: str, protocols: tuple[tuple[str, bytes], ...] = ()) -> int:
        return self.ctx.join(member, instance_id=self.instance.get(member),
                             protocols=protocols or self.protocols)


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
    if isinstance(r, LeaveGroupResponse):
        return r.error_code or r.members[0].error_code
    if isinstance(r, OffsetDeleteResponse):
        return r.error_code or r.topics[0].partitions[0].error_code
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


#: Kafka's answers, one scenario per cell (the table's meaning pinned down).
KAFKA: dict[tuple[str, GroupState], tuple[Cell, tuple[object, GroupState]]] = {
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
    ("request_kind", "state"), list(KAFKA), ids=[f"{k}-{s.value}" for k, s in KAFKA]
)
def test_kafka_answers(request_kind: str, state: GroupState) -> None:
    cell, expected = KAFKA[(request_kind, state)]
    f = Fixture(state)
    token = cell(f)
    assert outcome(f.ctx, token) == expected
    if state is not S.DEAD:
        f.ctx.check_replay()


# ---------------------------------------------------------------------- the code table

Scenario = Callable[[Fixture], int]


def _leave(f: Fixture) -> int:
    if f.ctx.state() is S.EMPTY:  # no member left: a pending one leaves
        pending = f.ctx.join_reply(f.ctx.join()).member_id
        return f.ctx.leave(pending)
    return f.ctx.leave(f.b)


def _commit(f: Fixture) -> int:
    if f.ctx.state() is S.EMPTY:
        return f.ctx.commit({("t", 0): 7})  # generation -1: a simple consumer
    return f.ctx.commit({("t", 0): 7}, f.b, f.gen)


def _offset_delete(topic: str) -> Scenario:
    return lambda f: f.ctx.call(OffsetDelete("g", (FetchTopic(topic, (0,)),)))


#: request row -> variant -> what the client does
SCENARIOS: dict[Request, dict[str, Scenario]] = {
    R.JOIN_NEW: {"new": new_member_join},
    R.JOIN_STATIC: {
        "same": lambda f: f.ctx.join("", instance_id="ib", protocols=f.protocols),
        "changed": lambda f: f.ctx.join("", instance_id="ib", protocols=(("roundrobin", SUB),)),
    },
    R.JOIN_KNOWN: {
        "follower-same": lambda f: f.rejoin(f.b),
        "follower-changed": lambda f: f.rejoin(
            f.b, (("range", encode_subscription(["t", "u"])),)),
        "leader-same": lambda f: f.rejoin(f.a),
    },
    R.SYNC: {"follower": follower_sync, "leader": leader_sync},
    R.HEARTBEAT: {"member": heartbeat},
    R.LEAVE: {"member": _leave},
    R.OFFSET_COMMIT: {"member": _commit},
    R.OFFSET_DELETE: {"subscribed": _offset_delete("t"), "unsubscribed": _offset_delete("u")},
    R.DELETE_GROUP: {"group": delete},
}

#: rows whose cells say whether the member's session is renewed
_RENEWING_ROWS = (R.HEARTBEAT, R.OFFSET_COMMIT)

Outcome = tuple[object, GroupState, bool | None, dict[tuple[str, int], int]]


def expected(request: Request, state: GroupState, variant: str, cell: Answer) -> Outcome:
    """What the cell says happens: (reply or PARKED, state after, session renewed (None:
    not checked), committed offsets after)."""
    committed = dict(BASELINE)
    renewed: bool | None = False if request in _RENEWING_ROWS else None
    reply: object
    if isinstance(cell, ErrorCode):
        return cell, state, renewed, committed
    after = state
    if cell is Do.JOIN:
        reply, after = PARKED, S.PREPARING_REBALANCE
    elif cell is Do.JOIN_IF_CHANGED:
        now = variant.endswith("same")
        reply, after = (NONE, state) if now else (PARKED, S.PREPARING_REBALANCE)
    elif cell is Do.JOIN_IF_LEADER_OR_CHANGED:
        now = variant == "follower-same"
        reply, after = (NONE, state) if now else (PARKED, S.PREPARING_REBALANCE)
    elif cell is Do.SYNC:
        reply, after = (PARKED, state) if variant == "follower" else (NONE, S.STABLE)
    elif cell is Do.ASSIGNMENT:
        reply = NONE
    elif cell in (Do.RENEW, Do.RENEW_REJOIN):
        reply, renewed = (NONE if cell is Do.RENEW else REBALANCING), True
    elif cell is Do.REMOVE:
        reply = NONE
        after = S.EMPTY if state is S.EMPTY else S.PREPARING_REBALANCE
    elif cell in (Do.STORE_SIMPLE, Do.STORE_RENEW):
        reply, renewed = NONE, cell is Do.STORE_RENEW
        committed[("t", 0)] = 7
    elif cell is Do.DELETE_OFFSETS or (
        cell is Do.DELETE_UNSUBSCRIBED and variant == "unsubscribed"
    ):
        reply = NONE
        del committed[("t" if variant == "subscribed" else "u", 0)]
    elif cell is Do.DELETE_UNSUBSCRIBED:
        reply = E.group_subscribed_to_topic
    elif cell is Do.DELETE_GROUP:
        reply, after, committed = NONE, S.DEAD, {}
    else:
        raise AssertionError(f"no expectation for {cell}")
    return reply, after, renewed, committed


CASES = [(r, s, v) for r in Request for s in GroupState for v in SCENARIOS[r]]


@pytest.mark.parametrize(
    ("request_row", "state", "variant"), CASES,
    ids=[f"{r.name}-{s.value}-{v}" for r, s, v in CASES],
)
def test_coordinator_follows_the_table(request_row: Request, state: GroupState,
                                       variant: str) -> None:
    cell = answer(request_row, state)
    f = Fixture(state, static=request_row is R.JOIN_STATIC, offsets=True)
    if cell is Do.UNREACHABLE:
        assert all(m.group_instance_id is None for m in f.ctx.describe().members)
        return
    f.ctx.sleep(1_000)  # a renewed session now ends later than before
    session = f.ctx.session_deadline(f.b)
    token = SCENARIOS[request_row][variant](f)
    renewed = f.ctx.session_deadline(f.b) not in (None, session)
    got = outcome(f.ctx, token)
    assert (*got, renewed if request_row in _RENEWING_ROWS else None,
            f.ctx.committed()) == expected(request_row, state, variant, cell)


def test_every_request_has_a_cell_in_every_state() -> None:
    assert set(ANSWERS) == {(r, s) for r in Request for s in GroupState}
    assert set(SCENARIOS) == set(Request)
    grid = format_answers().splitlines()
    assert grid[0].split() == [s.value for s in GroupState]
    assert [line.split()[0] for line in grid[1:]] == [r.name for r in Request]


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
