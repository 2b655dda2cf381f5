"""The classic group state machine: the transition table, the answer table, and the one
function that changes a group's state.

* :data:`VALID_PREVIOUS` (Kafka's ``validPreviousStates``): ``apply_transition(current,
  target)`` returns ``target`` or raises :class:`IllegalTransition`; nothing else changes a
  group's state. A group is built in one of :data:`INITIAL_STATES` (Empty when created;
  Empty or Stable when loaded from its record, as Kafka's ``ClassicGroup.fromRecord``).
* :data:`ANSWERS`: how each state answers each request (Kafka's classic
  ``GroupMetadataManager``). A cell is an error code (the request is answered with it) or a
  :class:`Do` (what the handler does). The handlers (``join.py``, ``sync.py``,
  ``heartbeat.py``, ``offsets.py``, ``admin.py``) decide by looking their cell up with
  :func:`answer`; ``tests/coordinator/test_answer_table.py`` drives the coordinator through
  every cell. ``print(format_answers())`` shows the table as a grid.

Order of checks: request checks (session timeout, group size, protocol, MEMBER_ID_REQUIRED)
and the Dead column first, then the member checks (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION) where the request names a member, then the cell (STORE_SIMPLE takes a
negative generation before the member checks). A group that does not exist answers JoinGroup
with a member id UNKNOWN_MEMBER_ID, SyncGroup and Heartbeat UNKNOWN_MEMBER_ID, LeaveGroup
UNKNOWN_MEMBER_ID per member, OffsetDelete and DeleteGroups GROUP_ID_NOT_FOUND; an
OffsetCommit with a negative generation creates an Empty group for it.
"""

from __future__ import annotations

import enum

from kio.schema.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
E = ErrorCode

#: Kafka's names of the classic group states, in lifecycle order. The names of both group
#: types (CLI, metrics) are :data:`samsa.coordinator.queries.STATE_NAMES`.
CLASSIC_STATE_NAMES: tuple[str, ...] = tuple(state.value for state in GroupState)

# ---------------------------------------------------------------------- transitions

#: target state -> states it may be entered from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset(GroupState),
}

#: states a group may be built in (created: Empty; loaded: Empty, or Stable with members).
INITIAL_STATES: frozenset[GroupState] = frozenset({S.EMPTY, S.STABLE})


class IllegalTransition(RuntimeError):
    """A state change the table does not allow: a coordinator bug, never a client error."""


def can_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS[target]


def apply_transition(current: GroupState, target: GroupState) -> GroupState:
    if not can_transition(current, target):
        raise IllegalTransition(f"{current.value} -> {target.value}")
    return target


def initial_state(state: GroupState) -> GroupState:
    """``state`` if a group may be built in it, else :class:`IllegalTransition`."""
    if state not in INITIAL_STATES:
        raise IllegalTransition(f"a group cannot start {state.value}")
    return state


def parse_state(name: str) -> GroupState | None:
    """Case-insensitive state name lookup (ListGroups filters)."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None


# ---------------------------------------------------------------------- answers


class Request(enum.Enum):
    """Rows of :data:`ANSWERS`: the requests whose answer depends on the group's state."""

    JOIN_NEW = "JoinGroup, new member"
    JOIN_STATIC = "JoinGroup, known group.instance.id without member id"
    JOIN_KNOWN = "JoinGroup, known member"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"
    OFFSET_COMMIT = "OffsetCommit"
    OFFSET_DELETE = "OffsetDelete"
    DELETE_GROUP = "DeleteGroups"


class Do(enum.Enum):
    """A cell that is more than an error code: what the handler does."""

    #: park the JoinGroup (member added, updated or re-keyed); ->PreparingRebalance where
    #: VALID_PREVIOUS allows it (an Empty group first waits the initial rebalance delay)
    JOIN = "join"
    #: same metadata (static: same group protocol): answered now with the current
    #: generation; changed: JOIN
    JOIN_IF_CHANGED = "join if changed"
    #: a follower with the same metadata: answered now with the current generation; the
    #: leader, or changed metadata: JOIN
    JOIN_IF_LEADER_OR_CHANGED = "join if leader/changed"
    #: a follower parks until the leader's SyncGroup; the leader's assignment is stored,
    #: every parked SyncGroup answered, ->Stable
    SYNC = "park or assign"
    #: NONE with the member's current assignment
    ASSIGNMENT = "assignment"
    #: renew the member's session; NONE
    RENEW = "renew"
    #: renew the member's session; REBALANCE_IN_PROGRESS (rejoin)
    RENEW_REJOIN = "renew, rejoin"
    #: each member leaves (a pending one too); the group rebalances or completes its join
    REMOVE = "remove"
    #: store the offsets (generation < 0: no member checks, a simple consumer)
    STORE_SIMPLE = "store (simple)"
    #: renew the member's session and store the offsets
    STORE_RENEW = "renew, store"
    #: delete every requested offset
    DELETE_OFFSETS = "delete"
    #: consumer protocol: delete offsets of topics not subscribed to (others
    #: GROUP_SUBSCRIBED_TO_TOPIC); another protocol: NON_EMPTY_GROUP
    DELETE_UNSUBSCRIBED = "delete unsubscribed"
    #: tombstones for the group's offsets and metadata; ->Dead
    DELETE_GROUP = "delete group"
    #: cannot happen (an Empty group has no static member): a coordinator bug if it does
    UNREACHABLE = "unreachable"


Answer = Do | ErrorCode


def _row(
    empty: Answer, preparing: Answer, completing: Answer, stable: Answer, dead: Answer
) -> tuple[Answer, ...]:
    return (empty, preparing, completing, stable, dead)


_NOT_AV = E.coordinator_not_available
_COLUMNS = (S.EMPTY, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.DEAD)
_ROWS: dict[Request, tuple[Answer, ...]] = {
    Request.JOIN_NEW: _row(
        empty=Do.JOIN, preparing=Do.JOIN, completing=Do.JOIN, stable=Do.JOIN, dead=_NOT_AV),
    Request.JOIN_STATIC: _row(
        empty=Do.UNREACHABLE, preparing=Do.JOIN, completing=Do.JOIN,
        stable=Do.JOIN_IF_CHANGED, dead=_NOT_AV),
    Request.JOIN_KNOWN: _row(
        empty=E.unknown_member_id, preparing=Do.JOIN, completing=Do.JOIN_IF_CHANGED,
        stable=Do.JOIN_IF_LEADER_OR_CHANGED, dead=_NOT_AV),
    Request.SYNC: _row(
        empty=E.unknown_member_id, preparing=E.rebalance_in_progress, completing=Do.SYNC,
        stable=Do.ASSIGNMENT, dead=_NOT_AV),
    Request.HEARTBEAT: _row(
        empty=E.unknown_member_id, preparing=Do.RENEW_REJOIN, completing=Do.RENEW,
        stable=Do.RENEW, dead=_NOT_AV),
    Request.LEAVE: _row(
        empty=Do.REMOVE, preparing=Do.REMOVE, completing=Do.REMOVE, stable=Do.REMOVE,
        dead=_NOT_AV),
    Request.OFFSET_COMMIT: _row(
        empty=Do.STORE_SIMPLE, preparing=Do.STORE_RENEW, completing=E.rebalance_in_progress,
        stable=Do.STORE_RENEW, dead=_NOT_AV),
    Request.OFFSET_DELETE: _row(
        empty=Do.DELETE_OFFSETS, preparing=Do.DELETE_UNSUBSCRIBED,
        completing=Do.DELETE_UNSUBSCRIBED, stable=Do.DELETE_UNSUBSCRIBED,
        dead=E.group_id_not_found),
    Request.DELETE_GROUP: _row(
        empty=Do.DELETE_GROUP, preparing=E.non_empty_group, completing=E.non_empty_group,
        stable=E.non_empty_group, dead=E.group_id_not_found),
}

#: (request, state) -> the state's answer; every pair has a cell.
ANSWERS: dict[tuple[Request, GroupState], Answer] = {
    (request, state): cell
    for request, cells in _ROWS.items()
    for state, cell in zip(_COLUMNS, cells, strict=True)
}


def answer(request: Request, state: GroupState) -> Answer:
    """The cell of :data:`ANSWERS` for ``request`` in ``state``."""
    return ANSWERS[request, state]


def row(request: Request) -> dict[GroupState, Answer]:
    """``request``'s row, state -> answer. Handlers bind their rows once: a lookup by
    state alone costs a fifth of :func:`answer` (enum hashes run in Python)."""
    return {state: ANSWERS[request, state] for state in GroupState}


def dead_answer(request: Request) -> ErrorCode:
    """The Dead column's error for ``request`` (checked before the member checks)."""
    return as_error(ANSWERS[request, S.DEAD])


def as_error(cell: Answer) -> ErrorCode:
    """A cell the handler answers with its error code (a :class:`Do` here is a bug)."""
    if not isinstance(cell, ErrorCode):
        raise AssertionError(f"{cell} is not an error answer")
    return cell


def format_answers() -> str:
    """:data:`ANSWERS` as a text grid (requests down, states across)."""

    def label(cell: Answer) -> str:
        return cell.value if isinstance(cell, Do) else cell.name.upper()

    head = ["", *(s.value for s in _COLUMNS)]
    rows = [head, *([r.name, *(label(ANSWERS[r, s]) for s in _COLUMNS)] for r in Request)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(text.ljust(w) for text, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
