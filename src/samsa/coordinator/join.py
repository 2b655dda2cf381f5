"""JoinGroup (API key 11): new members, known members, static members.

Order of checks follows Kafka's ``handleJoinGroup``: session timeout bounds, group lookup
(only a member without id may create a group), group size, then the new-member or
known-member path; finally the join phase is completed if everyone is in. What each state
does with the join is its cell of ``state.ANSWERS`` (rows JOIN_NEW, JOIN_STATIC, JOIN_KNOWN).
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from samsa.coordinator import rebalance as rb
from samsa.coordinator import record_factory as records
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import NO_MEMBER_ID, JoinGroup
from samsa.coordinator.group import Group, Member
from samsa.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from samsa.coordinator.state import (
    Answer,
    Do,
    GroupState,
    Request,
    dead_answer,
    row,
)
from samsa.coordinator.timers import TimerKind

S = GroupState
E = ErrorCode
_JOIN_NEW = row(Request.JOIN_NEW)
_JOIN_STATIC = row(Request.JOIN_STATIC)
_JOIN_KNOWN = row(Request.JOIN_KNOWN)


def handle_join(core: ShardCore, ev: JoinGroup, token: object) -> None:
    cfg = core.config
    if not cfg.min_session_timeout_ms <= ev.session_timeout_ms <= cfg.max_session_timeout_ms:
        core.reply(token, JoinGroupResponse(E.invalid_session_timeout, ev.member_id))
        return
    is_new = ev.member_id == NO_MEMBER_ID
    group = core.groups.get(ev.group_id)
    if group is None:
        if not is_new:
            core.reply(token, JoinGroupResponse(E.unknown_member_id, ev.member_id))
            return
        group = rb.create_group(core, ev.group_id)
    if not _accept_joining_member(core, group, ev.member_id):
        rb.remove_member(core, group, ev.member_id)
        core.reply(token, JoinGroupResponse(E.group_max_size_reached, NO_MEMBER_ID))
    elif is_new:
        _join_new_member(core, group, ev, token)
    else:
        _join_known_member(core, group, ev, token)
    rb.try_complete_join(core, group)


def _accept_joining_member(core: ShardCore, group: Group, member_id: str) -> bool:
    max_size = core.config.max_size
    member = group.members.get(member_id)
    if group.is_(S.EMPTY, S.DEAD):
        return True
    if group.is_(S.PREPARING_REBALANCE):
        # (len(members) bounds the awaiting count: skips a scan of every member per join)
        return ((member is not None and member.awaiting_join)
                or len(group.members) < max_size or group.num_awaiting_join() < max_size)
    return member is not None or len(group.members) < max_size


def _new_member(ev: JoinGroup, member_id: str, instance_id: str | None) -> Member:
    return Member(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=ev.client_id,
        client_host=ev.client_host,
        rebalance_timeout_ms=ev.rebalance_timeout_ms,
        session_timeout_ms=ev.session_timeout_ms,
        protocol_type=ev.protocol_type,
        protocols=tuple(ev.protocols),
    )


def _protocol_names(ev: JoinGroup) -> list[str]:
    return [name for name, _ in ev.protocols]


# ---------------------------------------------------------------------- new members


def _join_new_member(core: ShardCore, group: Group, ev: JoinGroup, token: object) -> None:
    instance_id = ev.group_instance_id
    static = group.has_static(instance_id)
    cell = (_JOIN_STATIC if static else _JOIN_NEW)[group.state]
    if isinstance(cell, ErrorCode):  # the Dead column
        core.reply(token, JoinGroupResponse(cell, NO_MEMBER_ID))
        return
    if not group.supports_protocols(ev.protocol_type, _protocol_names(ev)):
        core.reply(token, JoinGroupResponse(E.inconsistent_group_protocol, NO_MEMBER_ID))
        return
    new_id = core.new_member_id(instance_id if instance_id is not None else ev.client_id)
    if static:
        _static_member_rejoin(core, group, ev, new_id, token, cell)
    elif instance_id is not None:
        rb.add_member_and_rebalance(core, group, _new_member(ev, new_id, instance_id), token)
    elif ev.require_known_member_id:
        group.pending_members[new_id] = None
        core.schedule(TimerKind.PENDING_MEMBER, group.group_id, new_id, ev.session_timeout_ms)
        core.reply(token, JoinGroupResponse(E.member_id_required, new_id))
    else:
        rb.add_member_and_rebalance(core, group, _new_member(ev, new_id, None), token)


def _static_member_rejoin(
    core: ShardCore, group: Group, ev: JoinGroup, new_id: str, token: object, cell: Do
) -> None:
    """A known group.instance.id rejoins without member id: fence the old id, keep the
    member, and rebalance only if the group's protocol would change."""
    assert ev.group_instance_id is not None
    old_id = group.static_members[ev.group_instance_id]
    previous_leader = group.leader_id or ""
    member = group.members[old_id]
    rb.answer_join(core, group, member, JoinGroupResponse(E.fenced_instance_id, old_id))
    rb.answer_sync(core, member, SyncGroupResponse(E.fenced_instance_id))
    core.cancel(TimerKind.SESSION, group.group_id, old_id)
    group.replace_static_member(ev.group_instance_id, old_id, new_id)
    rb.schedule_heartbeat(core, group, member)
    rb.update_member(group, member, ev.protocols, ev.rebalance_timeout_ms,
                     ev.session_timeout_ms)
    rb.park_join(core, group, member, token)

    if cell is Do.JOIN_IF_CHANGED and group.protocol_name == group.select_protocol():
        _static_rejoin_without_rebalance(core, group, member, ev, previous_leader)
    elif cell in (Do.JOIN, Do.JOIN_IF_CHANGED):
        rb.maybe_prepare_rebalance(core, group)
    else:
        raise AssertionError(f"static member in a {group.state.value} group: {cell}")


def _static_rejoin_without_rebalance(
    core: ShardCore, group: Group, member: Member, ev: JoinGroup, previous_leader: str
) -> None:
    core.write(*records.group_metadata(
        group, {mid: m.assignment for mid, m in group.members.items()}))
    if ev.supports_skip_assignment:
        is_leader = group.is_leader(member.member_id)
        response = rb.join_response(group, member, skip_assignment=is_leader)
    else:
        # Before v9 the old leader id is returned so a rejoining leader does not assign.
        response = replace(rb.join_response(group, member), leader=previous_leader, members=())
    rb.answer_join(core, group, member, response)


# ---------------------------------------------------------------------- known members


def _join_known_member(core: ShardCore, group: Group, ev: JoinGroup, token: object) -> None:
    mid = ev.member_id
    if group.is_(S.DEAD):
        core.reply(token, JoinGroupResponse(dead_answer(Request.JOIN_KNOWN), mid))
    elif not group.supports_protocols(ev.protocol_type, _protocol_names(ev)):
        core.reply(token, JoinGroupResponse(E.inconsistent_group_protocol, mid))
    elif mid in group.pending_members:
        if ev.group_instance_id is not None:
            # Kafka raises IllegalStateException here: a pending member is never static.
            core.reply(token, JoinGroupResponse(E.unknown_server_error, mid))
            return
        rb.add_member_and_rebalance(core, group, _new_member(ev, mid, None), token)
    elif group.is_static_fenced(ev.group_instance_id, mid):
        core.reply(token, JoinGroupResponse(E.fenced_instance_id, mid))
    elif mid not in group.members or (
        ev.group_instance_id is not None and not group.has_static(ev.group_instance_id)
    ):
        core.reply(token, JoinGroupResponse(E.unknown_member_id, mid))
    else:
        _rejoin(core, group, group.members[mid], ev, token)


def _rejoin(core: ShardCore, group: Group, member: Member, ev: JoinGroup, token: object) -> None:
    cell = _JOIN_KNOWN[group.state]
    if isinstance(cell, ErrorCode):
        core.reply(token, JoinGroupResponse(cell, member.member_id))
    elif _keeps_generation(cell, group, member, ev):
        core.reply(token, rb.join_response(group, member))
    else:
        rb.update_member_and_rebalance(
            core,
            group,
            member,
            ev.protocols,
            ev.rebalance_timeout_ms,
            ev.session_timeout_ms,
            token,
        )


def _keeps_generation(cell: Answer, group: Group, member: Member, ev: JoinGroup) -> bool:
    """Whether a known member's join is answered now with the current generation."""
    if cell is Do.JOIN:
        return False
    if cell is Do.JOIN_IF_CHANGED:
        return member.matches(ev.protocols)
    if cell is Do.JOIN_IF_LEADER_OR_CHANGED:
        return not group.is_leader(member.member_id) and member.matches(ev.protocols)
    raise AssertionError(f"{cell} is not a JoinGroup answer")
