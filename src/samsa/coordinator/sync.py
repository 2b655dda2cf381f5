"""SyncGroup (API key 14): followers park, the leader's assignment completes the phase.

What each state does is its cell of ``state.ANSWERS`` (row SYNC)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import rebalance as rb
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import SyncGroup
from samsa.coordinator.group import Group
from samsa.coordinator.members import validate_current_member
from samsa.coordinator.responses import SyncGroupResponse
from samsa.coordinator.state import Do, GroupState, Request, as_error, dead_answer, row

S = GroupState
E = ErrorCode
_SYNC = row(Request.SYNC)


def handle_sync(core: ShardCore, ev: SyncGroup, token: object) -> None:
    group = core.groups.get(ev.group_id)
    if group is None:
        core.reply(token, SyncGroupResponse(E.unknown_member_id))
        return
    error = _validate(group, ev)
    cell = _SYNC[group.state]
    if error is not None:
        core.reply(token, SyncGroupResponse(error))
    elif cell is Do.SYNC:
        _sync_completing(core, group, ev, token)
    elif cell is Do.ASSIGNMENT:
        _sync_stable(core, group, ev, token)
    else:
        core.reply(token, SyncGroupResponse(as_error(cell)))


def _validate(group: Group, ev: SyncGroup) -> int | None:
    if group.is_(S.DEAD):
        return dead_answer(Request.SYNC)
    error = validate_current_member(group, ev.member_id, ev.group_instance_id)
    if error is not None:
        return error
    if ev.generation_id != group.generation:
        return E.illegal_generation
    if ev.protocol_type is not None and ev.protocol_type != group.protocol_type:
        return E.inconsistent_group_protocol
    if ev.protocol_name is not None and ev.protocol_name != group.protocol_name:
        return E.inconsistent_group_protocol
    return None


def _sync_completing(core: ShardCore, group: Group, ev: SyncGroup, token: object) -> None:
    member = group.members[ev.member_id]
    rb.park_sync(core, member, token)
    rb.remove_pending_sync(core, group, ev.member_id)
    if group.is_leader(ev.member_id):
        rb.complete_sync(core, group, dict(ev.assignments))


def _sync_stable(core: ShardCore, group: Group, ev: SyncGroup, token: object) -> None:
    member = group.members[ev.member_id]
    rb.remove_pending_sync(core, group, ev.member_id)
    core.reply(
        token,
        SyncGroupResponse(E.none, member.assignment, group.protocol_type, group.protocol_name),
    )
    rb.schedule_heartbeat(core, group, member)
