"""Hypothesis properties of the server-side assignors ``uniform`` and ``range``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.assignors.server import GroupSpec, MemberSpec, RangeAssignor, TopicInfo, UniformAssignor

from .checks import TP, again, check_balanced, check_valid, flat, tid

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RACKS = ["a", "b", "c"]
Case = tuple[GroupSpec, dict[uuid.UUID, TopicInfo]]


@st.composite
def cases(draw: st.DrawFn, homogeneous: bool | None = None, racks: bool | None = None,
          current: bool = True) -> Case:
    ntopics = draw(st.integers(1, 4))
    use_racks = draw(st.booleans()) if racks is None else racks
    view = {}
    for k in range(ntopics):
        n = draw(st.integers(0, 9))
        prs = {}
        if use_racks:
            for p in range(n):
                rs = draw(st.sets(st.sampled_from([*RACKS, "d"]), max_size=2))
                if rs:
                    prs[p] = frozenset(rs)
        view[tid(k)] = TopicInfo(tid(k), f"t{k}", n, prs)
    ids = draw(st.lists(st.sampled_from([f"m{i}" for i in range(10)]), min_size=1,
                        max_size=7, unique=True))
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    everyone = frozenset(draw(st.sets(st.sampled_from(sorted(view)), min_size=1)))
    members = {}
    for m in ids:
        subs = everyone if same else frozenset(draw(st.sets(st.sampled_from(sorted(view)))))
        rack = draw(st.sampled_from([None, *RACKS])) if use_racks else None
        members[m] = MemberSpec(m, subs, rack_id=rack)
    cur: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    if current:
        for m in draw(st.lists(st.sampled_from(ids), unique=True)):
            cur[m] = {
                t: frozenset(draw(st.sets(st.integers(0, view[t].partitions + 1), min_size=1)))
                for t in draw(st.sets(st.sampled_from(sorted(view))))
            }
    return GroupSpec(members, cur), view


def shuffled(spec: GroupSpec, order: list[int]) -> GroupSpec:
    """The same group with members (and current entries) inserted in another order."""
    ids = list(spec.members)
    perm = [ids[i % len(ids)] for i in order if i < len(ids)]
    perm += [m for m in ids if m not in perm]
    perm = list(dict.fromkeys(perm))
    cur = {m: dict(reversed(list(spec.current[m].items())))
           for m in reversed(perm) if m in spec.current}
    return GroupSpec({m: spec.members[m] for m in perm}, cur)


def without(spec: GroupSpec, result: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
            leaver: str) -> GroupSpec:
    members = {m: s for m, s in spec.members.items() if m != leaver}
    return GroupSpec(members, {m: dict(result[m]) for m in members})


# -- uniform ---------------------------------------------------------------------------------


@PROPS
@given(cases())
def test_uniform_assigns_every_subscribed_partition_once_and_balanced(case: Case) -> None:
    spec, view = case
    result = UniformAssignor().assign(spec, view)
    check_valid(result, spec, view)
    check_balanced(result, spec)


@PROPS
@given(cases())
def test_uniform_is_a_fixpoint(case: Case) -> None:
    """Assigning again with the result as the current assignment changes nothing."""
    spec, view = case
    result = UniformAssignor().assign(spec, view)
    assert UniformAssignor().assign(again(spec, result), view) == result


@PROPS
@given(cases(), st.lists(st.integers(0, 9)))
def test_uniform_is_deterministic(case: Case, order: list[int]) -> None:
    spec, view = case
    assert UniformAssignor().assign(shuffled(spec, order), view) == UniformAssignor().assign(
        spec, view)


@PROPS
@given(cases(homogeneous=True, racks=False), st.data())
def test_uniform_leaver_moves_only_its_partitions(case: Case, data: st.DataObject) -> None:
    """With identical subscriptions. (With different ones, balance may move more: when the
    leaver was the only other subscriber of a topic, its partitions land on one member,
    which then sheds partitions of a shared topic.)"""
    spec, view = case
    assignor = UniformAssignor()
    before = assignor.assign(again(spec, assignor.assign(spec, view)), view)
    leaver = data.draw(st.sampled_from(sorted(spec.members)))
    after = flat(assignor.assign(without(spec, before, leaver), view))
    for m, owned in flat(before).items():
        if m != leaver:
            assert owned <= after[m], f"{m} lost {sorted(owned - after[m])}"


def valid_current(spec: GroupSpec, view: Mapping[uuid.UUID, TopicInfo]) -> dict[str, set[TP]]:
    """What each member may keep: subscribed, existing, and a partition claimed twice stays
    with the member whose id sorts first."""
    claimed: set[TP] = set()
    out: dict[str, set[TP]] = {}
    for m in sorted(spec.members):
        mine = {(t, p) for t, ps in spec.current.get(m, {}).items()
                if t in spec.members[m].subscribed for p in ps
                if t in view and 0 <= p < view[t].partitions} - claimed
        claimed |= mine
        out[m] = mine
    return out


@PROPS
@given(cases(homogeneous=True, racks=False))
def test_uniform_keeps_as_much_as_balance_allows(case: Case) -> None:
    """Identical subscriptions: the partitions kept reach the bound, every member keeping up
    to its quota and the extra slots going to members that hold more."""
    spec, view = case
    result = flat(UniformAssignor().assign(spec, view))
    held = valid_current(spec, view)
    total = sum(len(ps) for ps in flat_all(view, spec))
    q, r = divmod(total, len(spec.members))
    bound = sum(min(len(h), q) for h in held.values()) + min(
        r, sum(1 for h in held.values() if len(h) > q))
    assert sum(len(result[m] & held[m]) for m in spec.members) == bound


def flat_all(view: Mapping[uuid.UUID, TopicInfo], spec: GroupSpec) -> list[set[TP]]:
    subscribed = next(iter(spec.members.values())).subscribed
    return [{(t, p) for p in range(view[t].partitions)} for t in subscribed]


@PROPS
@given(cases(homogeneous=True, racks=False), st.sampled_from(["a", "m3", "z"]))
def test_uniform_joiner_takes_partitions_no_member_gains(case: Case, joiner: str) -> None:
    """A member joins a settled group: the others only give partitions up."""
    spec, view = case
    assignor = UniformAssignor()
    before = assignor.assign(again(spec, assignor.assign(spec, view)), view)
    if joiner in spec.members:
        return
    subs = next(iter(spec.members.values())).subscribed
    members = {**spec.members, joiner: MemberSpec(joiner, subs)}
    after = flat(assignor.assign(GroupSpec(members, {m: dict(a) for m, a in before.items()}),
                                 view))
    for m, owned in flat(before).items():
        assert after[m] <= owned, f"{m} gained {sorted(after[m] - owned)}"


@PROPS
@given(cases(current=False), st.lists(st.tuples(st.sampled_from(["join", "leave", "resub"]),
                                                 st.integers(0, 9), st.integers(0, 15)),
                                       max_size=6))
def test_uniform_stays_valid_balanced_and_settled_through_churn(
        case: Case, steps: list[tuple[str, int, int]]) -> None:
    spec, view = case
    assignor = UniformAssignor()
    tids = sorted(view)
    result = assignor.assign(spec, view)
    for op, who, mask in steps:
        members = dict(spec.members)
        name = f"m{who}"
        subs = frozenset(t for k, t in enumerate(tids) if mask >> k & 1)
        if op == "join" and name not in members:
            members[name] = MemberSpec(name, subs)
        elif op == "leave" and len(members) > 1:
            members.pop(name, None)
        elif op == "resub" and name in members:
            members[name] = MemberSpec(name, subs)
        spec = GroupSpec(members, {m: dict(result[m]) for m in members if m in result})
        result = assignor.assign(spec, view)
        check_valid(result, spec, view)
        check_balanced(result, spec)
        assert assignor.assign(again(spec, result), view) == result


@PROPS
@given(cases(homogeneous=True, racks=True))
def test_uniform_rack_matching_cannot_improve_by_a_swap(case: Case) -> None:
    """No member holds a partition on another rack while a member on one of that
    partition's racks itself holds a partition on the wrong rack (a swap would match
    one more)."""
    spec, view = case
    result = UniformAssignor().assign(spec, view)
    check_valid(result, spec, view)
    rack = {m: s.rack_id for m, s in spec.members.items()}

    def wrong(m: str, t: uuid.UUID, p: int) -> bool:
        rs = view[t].racks.get(p, frozenset())
        return rack[m] is not None and bool(rs) and rack[m] not in rs

    shapes = {rs for info in view.values() for rs in info.racks.values() if rs}
    active = len(shapes) > 1 and bool(set(rack.values()) & set().union(*shapes))
    holders = {rack[m] for m, a in result.items() for t, ps in a.items() for p in ps
               if wrong(m, t, p)}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                if active and wrong(m, t, p):
                    assert not holders & view[t].racks[p], (m, t, p)


@PROPS
@given(cases(current=False))
def test_uniform_fresh_assignment_leaves_no_current_needed(case: Case) -> None:
    """With nothing current, the homogeneous case hands out contiguous runs."""
    spec, view = case
    result = UniformAssignor().assign(spec, view)
    check_valid(result, spec, view)
    check_balanced(result, spec)


# -- range -----------------------------------------------------------------------------------


@PROPS
@given(cases(racks=False))
def test_range_gives_each_subscriber_a_contiguous_even_share(case: Case) -> None:
    spec, view = case
    result = RangeAssignor().assign(spec, view)
    check_valid(result, spec, view)
    for t, info in view.items():
        subs = [m for m in sorted(spec.members) if t in spec.members[m].subscribed]
        if not subs:
            continue
        q, r = divmod(info.partitions, len(subs))
        start = 0
        for k, m in enumerate(subs):
            size = q + 1 if k < r else q
            assert sorted(result[m].get(t, ())) == list(range(start, start + size))
            start += size


@PROPS
@given(cases(homogeneous=True, racks=False))
def test_range_co_partitions_topics_of_equal_size(case: Case) -> None:
    spec, view = case
    result = RangeAssignor().assign(spec, view)
    subscribed = next(iter(spec.members.values())).subscribed
    for a in subscribed:
        for b in subscribed:
            if view[a].partitions == view[b].partitions:
                for m in result:
                    assert result[m].get(a) == result[m].get(b)


@PROPS
@given(cases(), st.lists(st.integers(0, 9)))
def test_range_is_deterministic_and_a_fixpoint(case: Case, order: list[int]) -> None:
    spec, view = case
    result = RangeAssignor().assign(spec, view)
    assert RangeAssignor().assign(shuffled(spec, order), view) == result
    assert RangeAssignor().assign(again(spec, result), view) == result
