"""Worked examples of ``uniform`` and ``range``, small enough to check by hand."""

from __future__ import annotations

from samsa.assignors.server import RangeAssignor, UniformAssignor

from .checks import by_number, check_balanced, check_valid, group, tid, topics


def test_uniform_fresh_group_gets_contiguous_runs_extra_to_the_first() -> None:
    view = topics(7)
    result = UniformAssignor().assign(group({"a": [0], "b": [0], "c": [0]}), view)
    assert by_number(result) == {"a": {0: [0, 1, 2]}, "b": {0: [3, 4]}, "c": {0: [5, 6]}}


def test_uniform_joiner_takes_from_the_fullest_and_others_keep() -> None:
    view = topics(4)
    spec = group({"a": [0], "b": [0], "c": [0]}, current={"a": {0: [0, 1]}, "b": {0: [2, 3]}})
    # 4 over 3: one member keeps 2; a and b both hold 2, a sorts first.
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "a": {0: [0, 1]}, "b": {0: [2]}, "c": {0: [3]}}


def test_uniform_extra_slot_goes_to_the_member_that_holds_more() -> None:
    view = topics(5)
    spec = group({"a": [0], "b": [0]}, current={"a": {0: [0, 1]}, "b": {0: [2, 3, 4]}})
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "a": {0: [0, 1]}, "b": {0: [2, 3, 4]}}


def test_uniform_leaver_partitions_spread_over_the_others() -> None:
    view = topics(6)
    spec = group({"a": [0], "c": [0]}, current={"a": {0: [0, 1]}, "b": {0: [2, 3]},
                                                "c": {0: [4, 5]}})
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "a": {0: [0, 1, 2]}, "c": {0: [3, 4, 5]}}


def test_uniform_drops_unsubscribed_missing_and_doubly_claimed_partitions() -> None:
    view = topics(4, 2)
    spec = group({"a": [0], "b": [0]},
                 current={"a": {0: [0, 1, 9], 1: [0, 1]}, "b": {0: [1, 2]}})
    # a keeps 0, 1 (9 does not exist, topic 1 is not subscribed); b keeps 2 (1 is a's).
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "a": {0: [0, 1]}, "b": {0: [2, 3]}}


def test_uniform_ignores_topics_missing_from_the_view() -> None:
    view = topics(2)
    spec = group({"a": [0, 5], "b": [0, 5]})
    assert by_number(UniformAssignor().assign(spec, view)) == {"a": {0: [0]}, "b": {0: [1]}}


def test_uniform_members_without_topics_get_nothing() -> None:
    assert UniformAssignor().assign(group({"a": [], "b": []}), topics(3)) == {"a": {}, "b": {}}
    assert UniformAssignor().assign(group({}), topics(3)) == {}


def test_uniform_heterogeneous_balances_shared_topic() -> None:
    # a alone on topic 0 (4 partitions); a and b share topic 1 (4 partitions).
    view = topics(4, 4)
    spec = group({"a": [0, 1], "b": [1]})
    result = UniformAssignor().assign(spec, view)
    check_valid(result, spec, view)
    check_balanced(result, spec)
    assert by_number(result) == {"a": {0: [0, 1, 2, 3]}, "b": {1: [0, 1, 2, 3]}}


def test_uniform_heterogeneous_keeps_current_when_balanced() -> None:
    view = topics(3, 3)
    current = {"a": {0: [0, 1, 2]}, "b": {1: [0, 1]}, "c": {1: [2]}}
    spec = group({"a": [0], "b": [0, 1], "c": [1]}, current=current)
    assert by_number(UniformAssignor().assign(spec, view)) == {
        "a": {0: [0, 1, 2]}, "b": {1: [0, 1]}, "c": {1: [2]}}


def test_uniform_heterogeneous_moves_from_overloaded_to_underloaded() -> None:
    view = topics(6)
    current = {"a": {0: [0, 1, 2, 3, 4, 5]}}
    spec = group({"a": [0], "b": [0], "c": [0], "x": []}, current=current)
    result = UniformAssignor().assign(spec, view)
    assert [len(result[m].get(tid(0), ())) for m in "abc"] == [2, 2, 2]
    assert result["x"] == {}
    assert result["a"][tid(0)] <= frozenset(range(6))


def test_range_co_partitions_as_kafka_documents() -> None:
    # Kafka's RangeAssignor javadoc: M0 [T1P0, T1P1, T2P0, T2P1], M1 [T1P2, T2P2].
    view = topics(3, 3)
    result = RangeAssignor().assign(group({"m0": [0, 1], "m1": [0, 1]}), view)
    assert by_number(result) == {"m0": {0: [0, 1], 1: [0, 1]}, "m1": {0: [2], 1: [2]}}
    assert result["m0"][tid(0)] == result["m0"][tid(1)]


def test_range_static_members_first_by_instance_id() -> None:
    view = topics(3)
    spec = group({"m0": [0], "m1": [0], "m2": [0]}, instances={"m1": "i0", "m2": "i1"})
    assert by_number(RangeAssignor().assign(spec, view)) == {
        "m1": {0: [0]}, "m2": {0: [1]}, "m0": {0: [2]}}
    # The static members come back with new member ids: same ranges.
    spec = group({"m0": [0], "n1": [0], "n2": [0]}, instances={"n1": "i0", "n2": "i1"})
    assert by_number(RangeAssignor().assign(spec, view)) == {
        "n1": {0: [0]}, "n2": {0: [1]}, "m0": {0: [2]}}


def test_range_heterogeneous_per_topic_subscribers() -> None:
    view = topics(4, 3)
    spec = group({"a": [0], "b": [0, 1], "c": [1]})
    assert by_number(RangeAssignor().assign(spec, view)) == {
        "a": {0: [0, 1]}, "b": {0: [2, 3], 1: [0, 1]}, "c": {1: [2]}}


def test_range_more_members_than_partitions() -> None:
    view = topics(2)
    result = RangeAssignor().assign(group({"a": [0], "b": [0], "c": [0]}), view)
    assert by_number(result) == {"a": {0: [0]}, "b": {0: [1]}, "c": {}}


def test_range_ignores_current_assignment() -> None:
    view = topics(4)
    spec = group({"a": [0], "b": [0]}, current={"a": {0: [2, 3]}, "b": {0: [0, 1]}})
    assert by_number(RangeAssignor().assign(spec, view)) == {
        "a": {0: [0, 1]}, "b": {0: [2, 3]}}
