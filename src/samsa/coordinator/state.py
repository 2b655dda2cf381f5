"""The classic group state machine: one transition table and one apply function.

``apply_transition(current, target)`` returns ``target`` or raises
:class:`IllegalTransition`; nothing else changes a group's state.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState

#: target state -> states it may be entered from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset(GroupState),
}


class IllegalTransition(RuntimeError):
    """A state change the table does not allow: a coordinator bug, never a client error."""


def can_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS[target]


def apply_transition(current: GroupState, target: GroupState) -> GroupState:
    if not can_transition(current, target):
        raise IllegalTransition(f"{current.value} -> {target.value}")
    return target


def parse_state(name: str) -> GroupState | None:
    """Case-insensitive state name lookup (ListGroups filters)."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None
