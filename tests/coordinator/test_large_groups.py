"""Large groups: the per-join work must not grow with the group (benchmarks/rebalance.py
found a 5,000-member join quadratic: every JoinGroup recounted every member's protocols),
and the incremental protocol bookkeeping must follow members that change protocols."""

from __future__ import annotations

import pytest

from samsa.coordinator import GroupState
from samsa.coordinator.group import Member

from .harness import SUB, Ctx

S = GroupState
INCONSISTENT = 23


def test_join_of_many_members_scans_protocols_linearly(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    original = Member.protocol_names

    def counted(self: Member) -> list[str]:
        nonlocal calls
        calls += 1
        return original(self)

    monkeypatch.setattr(Member, "protocol_names", counted)
    n = 1500
    ctx = Ctx()
    tokens = [ctx.join_new()[1] for _ in range(n)]
    ctx.sleep_until(lambda: all(ctx.reply(t) is not None for t in tokens))
    replies = [ctx.join_reply(t) for t in tokens]
    assert {r.error_code for r in replies} == {0}
    assert {r.generation_id for r in replies} == {1}
    assert len(replies[0].members) == n
    # Quadratic work would be ~n*n/2 scans; linear is a few per member.
    assert calls <= 10 * n, calls


def test_protocol_change_of_a_member_changes_what_the_group_supports() -> None:
    ctx = Ctx()
    both = (("range", SUB), ("roundrobin", SUB))
    a, ta = ctx.join_new(protocols=both)
    b, tb = ctx.join_new(protocols=both)
    ctx.sleep_until(lambda: ctx.reply(tb) is not None)
    gen = ctx.join_reply(ta).generation_id
    leader = ctx.join_reply(ta).leader
    ctx.sync(b if leader == a else a, gen)
    ctx.sync(leader, gen, ((a, b""), (b, b"")))
    assert ctx.state() is S.STABLE
    # A newcomer supporting only range is welcome while everybody supports range...
    assert ctx.join_reply(ctx.join(protocols=(("range", SUB),))).error_code != INCONSISTENT
    # ...but not once b rejoins supporting only roundrobin.
    ctx.join(b, protocols=(("roundrobin", SUB),))
    r = ctx.join_reply(ctx.join(protocols=(("range", SUB),)))
    assert r.error_code == INCONSISTENT
    r = ctx.join_reply(ctx.join(protocols=(("roundrobin", SUB),)))
    assert r.error_code != INCONSISTENT


def test_removed_member_no_longer_restricts_protocols() -> None:
    ctx = Ctx()
    only_range = (("range", SUB),)
    both = (("range", SUB), ("roundrobin", SUB))
    a, ta = ctx.join_new(protocols=only_range)
    _, tb = ctx.join_new(protocols=both)
    ctx.sleep_until(lambda: ctx.reply(tb) is not None)
    gen = ctx.join_reply(ta).generation_id
    assert ctx.join_reply(ctx.join(protocols=(("roundrobin", SUB),))).error_code == INCONSISTENT
    ctx.leave(a)
    assert ctx.shard().groups["g"].candidate_protocols() == {"range", "roundrobin"}
    assert gen == 1


def test_rebalance_of_a_large_stable_group_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every member of a Stable group rejoins: no rejoin may count the members that did."""
    ctx = Ctx()
    n = 1500
    ids, gen = ctx.stable_group(n)
    reads = 0

    def get(self: Member) -> bool:
        nonlocal reads
        reads += 1
        return bool(self.__dict__["awaiting_join"])

    def put(self: Member, value: bool) -> None:
        self.__dict__["awaiting_join"] = value

    monkeypatch.setattr(Member, "awaiting_join", property(get, put))
    tokens = [ctx.join(mid) for mid in ids]  # the first rejoin starts the rebalance
    ctx.sleep_until(lambda: all(ctx.reply(t) is not None for t in tokens))
    replies = [ctx.join_reply(t) for t in tokens]
    assert {r.error_code for r in replies} == {0}
    assert {r.generation_id for r in replies} == {gen + 1}
    # Counting the rejoined members on every rejoin would be ~n*n/2 reads.
    assert reads <= 20 * n, reads
    group = ctx.shard().groups["g"]
    assert group.num_awaiting_join() == sum(m.awaiting_join for m in group.members.values())
