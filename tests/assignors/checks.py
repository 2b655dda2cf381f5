"""Invariant checks in the style of Kafka's assignor tests (verifyValidityAndBalance)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from samsa import TopicPartition

Result = Mapping[str, Sequence[TopicPartition]]


def all_partitions(
    counts: Mapping[str, int], subs: Mapping[str, Sequence[str]]
) -> set[TopicPartition]:
    wanted = {t for ts in subs.values() for t in ts}
    return {TopicPartition(t, p) for t, n in counts.items() if t in wanted for p in range(n)}


def check_valid(
    result: Result,
    counts: Mapping[str, int],
    subs: Mapping[str, Sequence[str]],
    *,
    complete: bool = True,
) -> None:
    """Only subscribed topics, no partition twice, and (if ``complete``) every partition."""
    assert set(result) == set(subs)
    seen: Counter[TopicPartition] = Counter()
    for member, parts in result.items():
        for tp in parts:
            assert tp.topic in subs[member], f"{member} got {tp} without subscribing"
            assert 0 <= tp.partition < counts[tp.topic]
        seen.update(parts)
    twice = [tp for tp, k in seen.items() if k > 1]
    assert not twice, f"assigned twice: {twice}"
    if complete:
        missing = all_partitions(counts, subs) - set(seen)
        assert not missing, f"unassigned: {sorted(missing)}"


def check_balanced(result: Result, subs: Mapping[str, Sequence[str]]) -> None:
    """Kafka's criterion: if |A| > |B| + 1, A holds nothing B could take."""
    for a, pa in result.items():
        for b, pb in result.items():
            if len(pa) > len(pb) + 1:
                takeable = [tp for tp in pa if tp.topic in subs[b]]
                assert not takeable, f"{a} ({len(pa)}) holds {takeable[:3]}, {b} ({len(pb)}) not"


def loads(result: Result) -> tuple[int, ...]:
    """Member loads, largest first: compare with < for lexicographic balance."""
    return tuple(sorted((len(v) for v in result.values()), reverse=True))


def owner_map(owned: Mapping[str, Sequence[TopicPartition]]) -> dict[TopicPartition, str]:
    return {tp: m for m, parts in owned.items() for tp in parts}


def kept(result: Result, owned: Mapping[str, Sequence[TopicPartition]]) -> int:
    """How many partitions stay with the member that owned them."""
    return sum(len(set(result.get(m, ())) & set(parts)) for m, parts in owned.items())
