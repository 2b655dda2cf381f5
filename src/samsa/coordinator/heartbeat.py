"""Heartbeat (API key 12) and LeaveGroup (API key 13): rows HEARTBEAT and LEAVE of
``state.ANSWERS``."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import rebalance as rb
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import NO_MEMBER_ID, Heartbeat, LeaveGroup, LeavingMember
from samsa.coordinator.group import Group
from samsa.coordinator.members import validate_current_member
from samsa.coordinator.responses import (
    HeartbeatResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
)
from samsa.coordinator.state import Do, GroupState, Request, as_error, dead_answer, row

S = GroupState
E = ErrorCode
_HEARTBEAT = row(Request.HEARTBEAT)
_LEAVE = row(Request.LEAVE)


def handle_heartbeat(core: ShardCore, ev: Heartbeat, token: object) -> None:
    core.reply(token, HeartbeatResponse(_heartbeat(core, ev)))


def _heartbeat(core: ShardCore, ev: Heartbeat) -> int:
    group = core.groups.get(ev.group_id)
    if group is None:
        return E.unknown_member_id
    if group.is_(S.DEAD):
        return dead_answer(Request.HEARTBEAT)
    error = validate_current_member(group, ev.member_id, ev.group_instance_id)
    if error is not None:
        return error
    if ev.generation_id != group.generation:
        return E.illegal_generation
    cell = _HEARTBEAT[group.state]
    if cell is Do.RENEW or cell is Do.RENEW_REJOIN:
        rb.schedule_heartbeat(core, group, group.members[ev.member_id])
        return E.none if cell is Do.RENEW else E.rebalance_in_progress
    return as_error(cell)


def handle_leave(core: ShardCore, ev: LeaveGroup, token: object) -> None:
    group = core.groups.get(ev.group_id)
    if group is None:
        members = tuple(_answer(m, E.unknown_member_id) for m in ev.members)
        core.reply(token, LeaveGroupResponse(E.none, members))
        return
    cell = _LEAVE[group.state]
    if cell is not Do.REMOVE:  # the Dead column
        core.reply(token, LeaveGroupResponse(as_error(cell)))
        return
    members = tuple(_answer(m, _leave_one(core, group, m)) for m in ev.members)
    core.reply(token, LeaveGroupResponse(E.none, members))


def _answer(m: LeavingMember, error: int) -> LeaveGroupMemberResponse:
    return LeaveGroupMemberResponse(m.member_id, m.group_instance_id, error)


def _leave_one(core: ShardCore, group: Group, m: LeavingMember) -> int:
    if m.member_id == NO_MEMBER_ID:
        # Administrative removal by group.instance.id.
        current = group.static_members.get(m.group_instance_id or "")
        if m.group_instance_id is None or current is None:
            return E.unknown_member_id
        rb.remove_member_and_update_group(core, group, group.members[current])
        return E.none
    if m.member_id in group.pending_members:
        rb.remove_pending_member(core, group, m.member_id)
        return E.none
    error = validate_current_member(group, m.member_id, m.group_instance_id)
    if error is not None:
        return error
    rb.remove_member_and_update_group(core, group, group.members[m.member_id])
    return E.none
