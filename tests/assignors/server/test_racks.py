"""Rack-aware ``uniform``: same-rack partitions where balance allows (balance first)."""

from __future__ import annotations

from samsa.assignors.server import UniformAssignor

from .checks import again, by_number, check_balanced, check_valid, group, topics

# Topic 0: partitions 0-1 on rack a, 2-3 on rack b.
SPLIT = {0: {0: ["a"], 1: ["a"], 2: ["b"], 3: ["b"]}}


def test_fresh_assignment_follows_racks() -> None:
    view = topics(4, racks=SPLIT)
    spec = group({"m1": [0], "m2": [0]}, racks={"m1": "b", "m2": "a"})
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "m1": {0: [2, 3]}, "m2": {0: [0, 1]}}


def test_rack_matching_wins_over_stickiness() -> None:
    view = topics(4, racks=SPLIT)
    spec = group({"m1": [0], "m2": [0]}, racks={"m1": "a", "m2": "b"},
                 current={"m1": {0: [2, 3]}, "m2": {0: [0, 1]}})
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "m1": {0: [0, 1]}, "m2": {0: [2, 3]}}


def test_balance_wins_over_rack_matching() -> None:
    # Three members on rack a, one on rack b: b's partitions cannot all go to rack b.
    view = topics(8, racks={0: {p: ["a"] if p < 2 else ["b"] for p in range(8)}})
    spec = group({"a1": [0], "a2": [0], "a3": [0], "b1": [0]},
                 racks={"a1": "a", "a2": "a", "a3": "a", "b1": "b"})
    result = UniformAssignor().assign(spec, view)
    check_valid(result, spec, view)
    check_balanced(result, spec)
    assert sorted(len(a.get(next(iter(view)), ())) for a in result.values()) == [2, 2, 2, 2]
    assert len(result["b1"][next(iter(view))]) == 2
    assert result["b1"][next(iter(view))] <= frozenset(range(2, 8))
    matched = sum(1 for m in ("a1", "a2", "a3") for p in result[m][next(iter(view))] if p < 2)
    assert matched == 2
    assert UniformAssignor().assign(again(spec, result), view) == result


def test_wrong_rack_partition_stays_with_its_holder_when_no_same_rack_room() -> None:
    # Partition 2 is on rack c, where nobody sits: it is sticky as usual.
    view = topics(3, racks={0: {0: ["a"], 1: ["b"], 2: ["c"]}})
    spec = group({"m1": [0], "m2": [0]}, racks={"m1": "a", "m2": "b"},
                 current={"m1": {0: [0]}, "m2": {0: [1, 2]}})
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "m1": {0: [0]}, "m2": {0: [1, 2]}}


def test_racks_ignored_when_every_partition_is_on_every_rack() -> None:
    view = topics(4, racks={0: {p: ["a", "b"] for p in range(4)}})
    spec = group({"m1": [0], "m2": [0]}, racks={"m1": "b", "m2": "a"},
                 current={"m1": {0: [0, 1]}, "m2": {0: [2, 3]}})
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "m1": {0: [0, 1]}, "m2": {0: [2, 3]}}


def test_members_without_racks_take_what_is_left() -> None:
    view = topics(4, racks=SPLIT)
    spec = group({"m1": [0], "m2": [0]}, racks={"m2": "b"})
    result = by_number(UniformAssignor().assign(spec, view))
    assert result == {"m1": {0: [0, 1]}, "m2": {0: [2, 3]}}


def test_heterogeneous_fill_prefers_same_rack_within_a_level() -> None:
    view = topics(4, 2, racks=SPLIT)
    spec = group({"m1": [0, 1], "m2": [0]}, racks={"m1": "b", "m2": "a"})
    result = UniformAssignor().assign(spec, view)
    check_valid(result, spec, view)
    check_balanced(result, spec)
    # Topic 1 (m1 alone) first: m1 has 2, so m2 takes 0 and 1 alone; then both are level
    # and partition 2 (rack b) goes to m1 on rack b, though m2 comes first in the level.
    assert by_number(result) == {"m1": {0: [2], 1: [0, 1]}, "m2": {0: [0, 1, 3]}}
