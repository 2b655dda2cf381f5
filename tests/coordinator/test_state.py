import itertools
from dataclasses import replace

import pytest

from samsa.coordinator.group import Group
from samsa.coordinator.records import GroupMetadataValue, MemberMetadataValue
from samsa.coordinator.state import (
    VALID_PREVIOUS,
    GroupState,
    IllegalTransition,
    apply_transition,
    parse_state,
)

S = GroupState
ALLOWED = {
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    *((s, S.DEAD) for s in S),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_every_transition_pair(current: GroupState, target: GroupState) -> None:
    if (current, target) in ALLOWED:
        assert apply_transition(current, target) is target
    else:
        with pytest.raises(IllegalTransition):
            apply_transition(current, target)


def test_table_covers_every_state() -> None:
    assert set(VALID_PREVIOUS) == set(S)


def test_parse_state_is_case_insensitive() -> None:
    assert parse_state("stable") is S.STABLE
    assert parse_state("COMPLETINGREBALANCE") is S.COMPLETING_REBALANCE
    assert parse_state("nope") is None


@pytest.mark.parametrize("state", list(S))
def test_a_group_is_built_only_in_an_initial_state(state: GroupState) -> None:
    """Created Empty, loaded Empty or Stable; never built past the transition table."""
    if state in (S.EMPTY, S.STABLE):
        assert Group("g", state=state).state is state
    else:
        with pytest.raises(IllegalTransition):
            Group("g", state=state)


def test_loaded_group_starts_stable_with_members_else_empty() -> None:
    member = MemberMetadataValue("m", None, "c", "/h", 1000, 1000, b"", b"")
    value = GroupMetadataValue("consumer", 3, "range", "m", 5, (member,))
    assert Group.from_record("g", value).state is S.STABLE
    assert Group.from_record("g", replace(value, members=())).state is S.EMPTY
    assert Group.from_record("g", None).state is S.EMPTY
