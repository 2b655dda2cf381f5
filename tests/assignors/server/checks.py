"""Builders and invariant checks for the server-side assignor tests."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping

from samsa.assignors.server import GroupSpec, MemberSpec, TopicInfo

Result = Mapping[str, Mapping[uuid.UUID, frozenset[int]]]
TP = tuple[uuid.UUID, int]


def tid(k: int) -> uuid.UUID:
    """Topic ``k``'s id (ids sort like ``k``)."""
    return uuid.UUID(int=k + 1)


def topics(*counts: int, racks: Mapping[int, Mapping[int, Iterable[str]]] | None = None
           ) -> dict[uuid.UUID, TopicInfo]:
    """Topics 0..n-1 with these partition counts and optional replica racks per partition."""
    racks = racks or {}
    return {
        tid(k): TopicInfo(tid(k), f"t{k}", n,
                          {p: frozenset(rs) for p, rs in racks.get(k, {}).items()})
        for k, n in enumerate(counts)
    }


def group(subs: Mapping[str, Iterable[int]], current: Mapping[str, Mapping[int, Iterable[int]]]
          | None = None, racks: Mapping[str, str] | None = None,
          instances: Mapping[str, str] | None = None) -> GroupSpec:
    """Members by id with the topic numbers they subscribe to; ``current`` likewise."""
    racks = racks or {}
    instances = instances or {}
    members = {
        m: MemberSpec(m, frozenset(tid(k) for k in ks), instances.get(m), racks.get(m))
        for m, ks in subs.items()
    }
    cur = {
        m: {tid(k): frozenset(ps) for k, ps in a.items()} for m, a in (current or {}).items()
    }
    return GroupSpec(members, cur)


def flat(result: Result) -> dict[str, set[TP]]:
    return {m: {(t, p) for t, ps in a.items() for p in ps} for m, a in result.items()}


def by_number(result: Result) -> dict[str, dict[int, list[int]]]:
    """The result with topic numbers and sorted lists, for readable worked examples."""
    return {m: {t.int - 1: sorted(ps) for t, ps in sorted(a.items(), key=lambda x: x[0].int)}
            for m, a in result.items()}


def check_valid(result: Result, spec: GroupSpec, view: Mapping[uuid.UUID, TopicInfo]) -> None:
    """Every member present; each subscribed partition exactly once, to a subscriber; no
    empty entries."""
    assert set(result) == set(spec.members)
    seen: Counter[TP] = Counter()
    for m, a in result.items():
        for t, ps in a.items():
            assert ps, f"{m} has an empty entry for {t}"
            assert isinstance(ps, frozenset)
            assert t in spec.members[m].subscribed, f"{m} got {t} without subscribing"
            assert all(0 <= p < view[t].partitions for p in ps)
            seen.update((t, p) for p in ps)
    assert not [tp for tp, k in seen.items() if k > 1], "a partition assigned twice"
    wanted = {(t, p) for s in spec.members.values() for t in s.subscribed if t in view
              for p in range(view[t].partitions)}
    assert set(seen) == wanted, f"unassigned: {sorted(wanted - set(seen))[:5]}"


def loads(result: Result) -> dict[str, int]:
    return {m: sum(map(len, a.values())) for m, a in result.items()}


def check_balanced(result: Result, spec: GroupSpec) -> None:
    """Per topic: no holder of one of its partitions has two more partitions than any
    subscriber. So members with the same subscriptions differ by at most one, and with
    identical subscriptions all members do."""
    load = loads(result)
    for m, a in result.items():
        for t in a:
            for other, s in spec.members.items():
                if t in s.subscribed:
                    assert load[m] <= load[other] + 1, (
                        f"{m} ({load[m]}) holds {t}, subscriber {other} has {load[other]}")
    classes: dict[frozenset[uuid.UUID], list[int]] = {}
    for m, s in spec.members.items():
        classes.setdefault(s.subscribed, []).append(load[m])
    for ls in classes.values():
        assert max(ls) - min(ls) <= 1


def again(spec: GroupSpec, result: Result) -> GroupSpec:
    """The same group with ``result`` as its current assignment."""
    return GroupSpec(spec.members, {m: dict(a) for m, a in result.items()})
