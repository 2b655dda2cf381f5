"""The share groups' ``simple`` assignor: balanced, sticky to the previous target, a
partition shared when members outnumber partitions; and in the coordinator, members whose
new target has not reached them yet still cover every partition (the start stall of four
confluent-kafka share consumers on 16 partitions)."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.assignors.server.interface import TopicInfo
from samsa.coordinator.share.assignor import assign
from samsa.coordinator.share.group import Assignment
from tests.coordinator.consumer_ctx import T1, T2

from .share_ctx import SCtx

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T3 = uuid.UUID(int=3)


def _topics(**counts: int) -> dict[str, TopicInfo]:
    ids = {"t1": T1, "t2": T2, "t3": T3}
    return {name: TopicInfo(ids[name], name, n) for name, n in counts.items()}


def _parts(a: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


def _check_homogeneous(out: dict[str, Assignment], partitions: int) -> None:
    """Every partition has ``ceil(members / partitions)`` members, and two members' counts
    differ by at most one."""
    sharing = -(-len(out) // partitions)
    per_part = Counter(tp for a in out.values() for tp in _parts(a))
    assert len(per_part) == partitions and set(per_part.values()) == {sharing}
    sizes = [len(_parts(a)) for a in out.values()]
    assert max(sizes) - min(sizes) <= 1


def test_a_joining_member_takes_partitions_from_the_others_only() -> None:
    topics = _topics(t1=16)
    target = assign({"a": ("t1",)}, topics)
    assert target == {"a": {T1: tuple(range(16))}}
    for joined in ("b", "c", "d"):
        new = assign({m: ("t1",) for m in [*target, joined]}, topics, target)
        _check_homogeneous(new, 16)
        for m, before in target.items():
            assert _parts(new[m]) <= _parts(before), m
        target = new
    assert sorted(len(a[T1]) for a in target.values()) == [4, 4, 4, 4]


def test_a_leaving_members_partitions_go_to_the_others_and_nothing_else_moves() -> None:
    topics = _topics(t1=7)
    subs = {m: ("t1",) for m in "abc"}
    target = assign(subs, topics)
    del subs["b"]
    new = assign(subs, topics, target)
    _check_homogeneous(new, 7)
    for m in subs:
        assert _parts(new[m]) >= _parts(target[m])


def test_more_members_than_partitions_share_each_partition_evenly() -> None:
    out = assign({m: ("t1",) for m in "abcde"}, _topics(t1=3))
    _check_homogeneous(out, 3)  # 6 places: each partition twice, one member has two
    assert sorted(len(a[T1]) for a in out.values()) == [1, 1, 1, 1, 2]


def test_a_homogeneous_group_balances_all_its_partitions_together() -> None:
    out = assign({"a": ("t1", "t2"), "b": ("t1", "t2")}, _topics(t1=1, t2=1))
    assert sorted(len(_parts(a)) for a in out.values()) == [1, 1]


def test_a_heterogeneous_group_shares_each_topic_among_its_subscribers() -> None:
    out = assign({"a": ("t1",), "b": ("t1", "t2"), "c": ("t2",)}, _topics(t1=4, t2=1))
    assert out["a"][T1] and out["b"][T1] and set(out["a"][T1]) | set(out["b"][T1]) == {0, 1, 2, 3}
    assert out["b"][T2] == (0,) and out["c"][T2] == (0,)


def test_missing_topics_and_members_are_skipped() -> None:
    out = assign({"a": ("t1", "nope")}, _topics(t1=2), {"gone": {T1: (0,)}, "a": {T2: (0,)}})
    assert out == {"a": {T1: (0, 1)}}


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, tuple[str, ...]], dict[str, TopicInfo]]:
    topics = _topics(**{t: draw(st.integers(0, 6)) for t in ("t1", "t2", "t3")})
    names = st.lists(st.sampled_from(sorted(topics)), min_size=1, max_size=3, unique=True)
    same = draw(st.booleans())
    common = tuple(draw(names))
    members = draw(st.lists(st.sampled_from([f"m{i}" for i in range(10)]), min_size=1,
                            max_size=10, unique=True))
    return {m: common if same else tuple(draw(names)) for m in members}, topics


def _check_valid(subs: dict[str, tuple[str, ...]], topics: dict[str, TopicInfo],
                 out: dict[str, Assignment]) -> None:
    assert set(out) == set(subs)
    for m, a in out.items():
        allowed = {(topics[t].topic_id, p) for t in subs[m] for p in range(topics[t].partitions)}
        assert _parts(a) <= allowed
    wanted = {(topics[t].topic_id, p) for names in subs.values() for t in names
              for p in range(topics[t].partitions)}
    assert set().union(*(_parts(a) for a in out.values())) == wanted


@PROPS
@given(groups(), st.data())
def test_valid_balanced_and_stable(group: tuple[dict[str, tuple[str, ...]],
                                               dict[str, TopicInfo]], data: st.DataObject) -> None:
    subs, topics = group
    homogeneous = len(set(subs.values())) == 1
    partitions = sum(topics[t].partitions for t in next(iter(subs.values())))
    first = assign(subs, topics)
    _check_valid(subs, topics, first)
    if homogeneous and partitions:
        _check_homogeneous(first, partitions)
    assert assign(subs, topics, first) == first  # a balanced target stays as it is
    # from any previous target, the result is valid and balanced as well
    previous = {m: {t.topic_id: tuple(sorted(data.draw(st.sets(st.integers(0, 7)))))
                    for t in topics.values()} for m in data.draw(st.sets(st.sampled_from(
                        [f"m{i}" for i in range(12)])))}
    again = assign(subs, topics, previous)
    _check_valid(subs, topics, again)
    if homogeneous and partitions:
        _check_homogeneous(again, partitions)


@PROPS
@given(st.integers(1, 20), st.integers(2, 12))
def test_joins_only_shrink_the_others_targets(partitions: int, members: int) -> None:
    """Members joining one by one (no more than partitions): every member's new target is
    within its previous one, so a member still on an older target holds a superset of its
    newest."""
    topics = _topics(t1=partitions)
    target: dict[str, Assignment] = {}
    for i in range(min(members, partitions)):
        new = assign({f"m{j:02}": ("t1",) for j in range(i + 1)}, topics, target)
        _check_homogeneous(new, partitions)
        for m, before in target.items():
            assert _parts(new[m]) <= _parts(before), (m, before, new[m])
        target = new


@PROPS
@given(st.integers(1, 12), st.lists(st.integers(0, 11), max_size=30))
def test_members_behind_their_target_cover_every_partition(
        partitions: int, steps: list[int]) -> None:
    """Members join and heartbeat in any order, a member taking the newest target when it
    joins or heartbeats: the members' current assignments cover every partition. (A member
    that leaves is another matter: its partitions reach the others at their next heartbeat,
    as in Kafka.)"""
    topics = _topics(t1=partitions)
    target: dict[str, Assignment] = {}
    current: dict[str, Assignment] = {}
    for k in steps:
        m = f"m{k:02}"
        if m not in current:  # a join
            target = assign({x: ("t1",) for x in [*current, m]}, topics, target)
        current[m] = target[m]
        assert set().union(*(_parts(a) for a in current.values())) == {
                (T1, p) for p in range(partitions)}


def test_members_behind_the_newest_target_still_cover_every_partition() -> None:
    """Four share consumers joining a 16-partition topic as confluent-kafka's did when the
    group stalled: a member takes a new target only when it heartbeats (every 5 s), so the
    members' current assignments must cover the topic at every step."""
    ctx = SCtx()
    ctx.set_topics(TopicInfo(T1, "t1", 16))

    def covered() -> set[int]:
        return {p for m in ctx.share_group().members for p in ctx.assigned(m).get(T1, ())}

    def epoch(m: str) -> int:
        return ctx.share_group().members[m].member_epoch

    steps = [("a", 0), ("b", 0), ("c", 0), ("a", None), ("d", 0), ("a", None), ("b", None)]
    for member, join in steps:
        r = ctx.shb(member, epoch(member) if join is None else join)
        assert r.error_code == 0
        assert covered() == set(range(16)), (member, covered())
    # c is still on the target of epoch 3; once it heartbeats, all hold 4 partitions
    ctx.shb("c", epoch("c"))
    ctx.shb("d", epoch("d"))
    assert sorted(len(ctx.assigned(m)[T1]) for m in "abcd") == [4, 4, 4, 4]
    assert covered() == set(range(16))


def test_a_heterogeneous_group_evens_out_the_counts_over_topics() -> None:
    out = assign({"a": ("t1", "t2"), "b": ("t1", "t2"), "c": ("t3",)},
                 _topics(t1=3, t2=3, t3=1))
    assert (len(_parts(out["a"])), len(_parts(out["b"])), out["c"]) == (3, 3, {T3: (0,)})
