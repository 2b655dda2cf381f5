import itertools

import pytest

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
