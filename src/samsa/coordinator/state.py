"""The classic group state machine: one transition table and one apply function.

``apply_transition(current, target)`` returns ``target`` or raises
:class:`IllegalTransition`; nothing else changes a group's state.

How each state answers each request (Kafka's classic ``GroupMetadataManager``; one test per
cell in ``tests/coordinator/test_answer_table.py``):

=====================  ===========  ==================  ===================  ===========  ========
request                Empty        PreparingRebalance  CompletingRebalance  Stable       Dead
=====================  ===========  ==================  ===================  ===========  ========
JoinGroup, new member  park, ->PR   park                park, ->PR           park, ->PR   NOT_AV
JoinGroup, known       UNKNOWN_MID  park                same metadata: the   leader or    NOT_AV
                                                        current generation;  changed: ->PR;
                                                        changed: ->PR        follower same:
                                                                             answer now
SyncGroup              UNKNOWN_MID  REBALANCE_IN_PROG   follower: park;      assignment   NOT_AV
                                                        leader: answer all,
                                                        ->Stable
Heartbeat              UNKNOWN_MID  REBALANCE_IN_PROG   NONE                 NONE         NOT_AV
OffsetCommit           gen < 0: ok  member + gen ok: ok REBALANCE_IN_PROG    ok           NOT_AV
DeleteGroups           ->Dead       NON_EMPTY_GROUP     NON_EMPTY_GROUP      NON_EMPTY    NOT_FOUND
=====================  ===========  ==================  ===================  ===========  ========

``->PR`` is a move to PreparingRebalance, NOT_AV is COORDINATOR_NOT_AVAILABLE, NOT_FOUND is
GROUP_ID_NOT_FOUND. A group that does not exist answers JoinGroup with a member id, SyncGroup
and Heartbeat with UNKNOWN_MEMBER_ID; an OffsetCommit with generation -1 creates an Empty
group for it. Member checks (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) come
before the state's answer.
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

#: Kafka's names of the classic group states, in lifecycle order (CLI, metrics, ListGroups).
STATE_NAMES: tuple[str, ...] = tuple(state.value for state in GroupState)

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
