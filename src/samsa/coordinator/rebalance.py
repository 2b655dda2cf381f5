"""Group-level procedures shared by the handlers: rebalance start and completion,
member removal, assignment propagation, heartbeat scheduling.

Each is a small step of Kafka's classic GroupCoordinator (``prepareRebalance``,
``onCompleteJoin``, ``removeMemberAndUpdateGroup``, ``propagateAssignment``, ...).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import record_factory as records
from samsa.coordinator.config import NEW_MEMBER_JOIN_TIMEOUT_MS
from samsa.coordinator.core import ShardCore
from samsa.coordinator.group import Group, Member, Protocols
from samsa.coordinator.responses import JoinGroupMember, JoinGroupResponse, SyncGroupResponse
from samsa.coordinator.state import GroupState, can_transition
from samsa.coordinator.timers import TimerKind

S = GroupState
E = ErrorCode


# ---------------------------------------------------------------------- heartbeats



def create_group(core: ShardCore, group_id: str) -> Group:
    """A new, Empty classic group of the shard."""
    group = Group(group_id, state_timestamp=core.now_ms)
    core.groups[group_id] = group
    return group


def transition(core: ShardCore, group: Group, target: GroupState) -> None:
    """Move ``group`` to ``target`` (the state table's transitions), noted in its history."""
    before = group.state
    group.transition(target, core.now_ms)
    core.history.transitioned(group, before)


def remove_group(core: ShardCore, group: Group) -> None:
    """Mark ``group`` Dead and forget its soft state and timers."""
    transition(core, group, GroupState.DEAD)
    core.cancel_group_timers(group.group_id)
    core.groups.pop(group.group_id, None)


def schedule_heartbeat(core: ShardCore, group: Group, member: Member, timeout_ms: int = 0) -> None:
    """Kafka's ``completeAndScheduleNextHeartbeatExpiration``."""
    core.schedule(
        TimerKind.SESSION, group.group_id, member.member_id, timeout_ms or member.session_timeout_ms
    )


def session_expired(core: ShardCore, group: Group, member_id: str) -> None:
    """A member's session timer fired; members parked in a join or sync are spared."""
    member = group.members.get(member_id)
    if member is None:
        return
    if member.is_new or not (member.awaiting_join or member.awaiting_sync):
        remove_member_and_update_group(core, group, member)


# ---------------------------------------------------------------------- parking


def park_join(core: ShardCore, group: Group, member: Member, token: object) -> None:
    if member.awaiting_join:
        core.reply(member.join_token, JoinGroupResponse(E.rebalance_in_progress, member.member_id))
    group.set_awaiting_join(member, True)
    member.join_token = token


def answer_join(
    core: ShardCore, group: Group, member: Member, response: JoinGroupResponse
) -> None:
    if member.awaiting_join:
        core.reply(member.join_token, response)
        group.set_awaiting_join(member, False)
        member.join_token = None


def park_sync(core: ShardCore, member: Member, token: object) -> None:
    if member.awaiting_sync:
        core.reply(member.sync_token, SyncGroupResponse(E.rebalance_in_progress))
    member.awaiting_sync = True
    member.sync_token = token


def answer_sync(core: ShardCore, member: Member, response: SyncGroupResponse) -> bool:
    if not member.awaiting_sync:
        return False
    core.reply(member.sync_token, response)
    member.awaiting_sync = False
    member.sync_token = None
    return True


def join_response(group: Group, member: Member, skip_assignment: bool = False) -> JoinGroupResponse:
    """The current generation, as the member sees it (member list for the leader only)."""
    members: tuple[JoinGroupMember, ...] = ()
    if group.is_leader(member.member_id) and group.protocol_name is not None:
        protocol = group.protocol_name
        members = tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in group.members.values()
        )
    return JoinGroupResponse(
        error_code=E.none,
        member_id=member.member_id,
        generation_id=group.generation,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        skip_assignment=skip_assignment,
        members=members,
    )


# ---------------------------------------------------------------------- membership


def add_member_and_rebalance(
    core: ShardCore,
    group: Group,
    member: Member,
    token: object,
) -> None:
    member.is_new = True
    park_join(core, group, member, token)
    if group.is_(S.PREPARING_REBALANCE) and group.generation == 0:
        group.new_member_added = True
    group.add(member)
    core.cancel(TimerKind.PENDING_MEMBER, group.group_id, member.member_id)
    schedule_heartbeat(core, group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
    maybe_prepare_rebalance(core, group)


def update_member(
    group: Group,
    member: Member,
    protocols: Protocols,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
) -> None:
    group.set_protocols(member, protocols)
    member.rebalance_timeout_ms = rebalance_timeout_ms
    member.session_timeout_ms = session_timeout_ms


def update_member_and_rebalance(
    core: ShardCore,
    group: Group,
    member: Member,
    protocols: Protocols,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    token: object,
) -> None:
    update_member(group, member, protocols, rebalance_timeout_ms, session_timeout_ms)
    park_join(core, group, member, token)
    maybe_prepare_rebalance(core, group)


def remove_member(core: ShardCore, group: Group, member_id: str) -> Member | None:
    """Drop a member (or pending member) and its timers (no state change)."""
    member = group.remove(member_id)
    core.cancel(TimerKind.SESSION, group.group_id, member_id)
    core.cancel(TimerKind.PENDING_MEMBER, group.group_id, member_id)
    if not group.pending_sync:
        core.cancel(TimerKind.PENDING_SYNC, group.group_id)
    return member


def remove_member_and_update_group(core: ShardCore, group: Group, member: Member) -> None:
    """Kafka's ``removeMemberAndUpdateGroup``: answer its parked requests, drop it, and
    rebalance (Stable/CompletingRebalance) or try to finish the join phase."""
    answer_join(core, group, member, JoinGroupResponse(E.unknown_member_id, ""))
    answer_sync(core, member, SyncGroupResponse(E.unknown_member_id))
    remove_member(core, group, member.member_id)
    if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
        maybe_prepare_rebalance(core, group)
    elif group.is_(S.PREPARING_REBALANCE):
        try_complete_join(core, group)


def remove_pending_member(core: ShardCore, group: Group, member_id: str) -> None:
    group.pending_members.pop(member_id, None)
    core.cancel(TimerKind.PENDING_MEMBER, group.group_id, member_id)
    if group.is_(S.PREPARING_REBALANCE):
        try_complete_join(core, group)


def remove_pending_sync(core: ShardCore, group: Group, member_id: str) -> None:
    group.pending_sync.pop(member_id, None)
    if not group.pending_sync:
        core.cancel(TimerKind.PENDING_SYNC, group.group_id)


# ---------------------------------------------------------------------- join phase


def maybe_prepare_rebalance(core: ShardCore, group: Group) -> None:
    if can_transition(group.state, S.PREPARING_REBALANCE):
        prepare_rebalance(core, group)


def prepare_rebalance(core: ShardCore, group: Group) -> None:
    """Enter PreparingRebalance; an Empty group waits the initial delay first."""
    if group.is_(S.COMPLETING_REBALANCE):
        reset_and_propagate_error(core, group, E.rebalance_in_progress)
    core.cancel(TimerKind.PENDING_SYNC, group.group_id)
    was_empty = group.is_(S.EMPTY)
    transition(core, group, S.PREPARING_REBALANCE)
    if was_empty:
        delay = core.config.initial_rebalance_delay_ms
        group.new_member_added = False
        group.initial_delay_ms = delay
        group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        core.schedule(TimerKind.INITIAL_REBALANCE_DELAY, group.group_id, "", delay)
    else:
        core.schedule(TimerKind.REBALANCE_TIMEOUT, group.group_id, "", group.rebalance_timeout_ms())
        try_complete_join(core, group)


def try_complete_join(core: ShardCore, group: Group) -> None:
    """Finish the join phase early once everyone (and no pending member) has joined;
    never during the initial delay."""
    if not group.is_(S.PREPARING_REBALANCE):
        return
    if core.is_scheduled(TimerKind.INITIAL_REBALANCE_DELAY, group.group_id):
        return
    if group.has_all_members_joined():
        complete_join(core, group)


def initial_delay_expired(core: ShardCore, group: Group) -> None:
    """The initial delay ran out: wait again if a member joined meanwhile, else complete."""
    if not group.is_(S.PREPARING_REBALANCE):
        return
    if group.new_member_added and group.initial_remaining_ms != 0:
        group.new_member_added = False
        delay = min(core.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
        group.initial_remaining_ms = max(group.initial_remaining_ms - group.initial_delay_ms, 0)
        group.initial_delay_ms = delay
        core.schedule(TimerKind.INITIAL_REBALANCE_DELAY, group.group_id, "", delay)
    else:
        complete_join(core, group)


def complete_join(core: ShardCore, group: Group) -> None:
    """Kafka's ``onCompleteJoin``: drop dynamic members that did not rejoin, elect a
    leader, start the next generation and answer every parked JoinGroup."""
    core.cancel(TimerKind.INITIAL_REBALANCE_DELAY, group.group_id)
    core.cancel(TimerKind.REBALANCE_TIMEOUT, group.group_id)
    for member in group.not_yet_rejoined():
        if not member.is_static:
            remove_member(core, group, member.member_id)
    if not group.elect_joined_leader() and group.members:
        # Only static members that did not rejoin remain: wait another rebalance timeout.
        core.schedule(TimerKind.REBALANCE_TIMEOUT, group.group_id, "", group.rebalance_timeout_ms())
        return
    init_next_generation(core, group)
    if group.is_(S.EMPTY):
        core.write(*records.group_metadata(group, {}))
        return
    for member in group.members.values():
        answer_join(core, group, member, join_response(group, member))
        schedule_heartbeat(core, group, member)
        member.is_new = False
        group.pending_sync[member.member_id] = None
    core.schedule(TimerKind.PENDING_SYNC, group.group_id, "", group.rebalance_timeout_ms())


def init_next_generation(core: ShardCore, group: Group) -> None:
    group.generation += 1
    if group.members:
        group.protocol_name = group.select_protocol()
        transition(core, group, S.COMPLETING_REBALANCE)
    else:
        group.protocol_name = None
        transition(core, group, S.EMPTY)
    group.subscribed_topics = group.compute_subscribed_topics()
    group.pending_sync.clear()


# ---------------------------------------------------------------------- sync phase


def propagate_assignment(core: ShardCore, group: Group, error: int) -> None:
    ok = error == E.none
    for member in group.members.values():
        response = SyncGroupResponse(
            error_code=error,
            assignment=member.assignment,
            protocol_type=group.protocol_type if ok else None,
            protocol_name=group.protocol_name if ok else None,
        )
        if answer_sync(core, member, response):
            schedule_heartbeat(core, group, member)


def reset_and_propagate_error(core: ShardCore, group: Group, error: int) -> None:
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(core, group, error)


def complete_sync(core: ShardCore, group: Group, assignments: dict[str, bytes]) -> None:
    """The leader's assignment arrived: persist it, answer every parked sync, go Stable."""
    full = {mid: assignments.get(mid, b"") for mid in group.members}
    core.write(*records.group_metadata(group, full))
    for mid, member in group.members.items():
        member.assignment = full[mid]
    propagate_assignment(core, group, E.none)
    transition(core, group, S.STABLE)


def pending_sync_expired(core: ShardCore, group: Group) -> None:
    """Members that never synced within the rebalance timeout are removed; rebalance."""
    if not group.is_(S.COMPLETING_REBALANCE, S.STABLE):
        return
    for member_id in list(group.pending_sync):
        member = group.members.get(member_id)
        if member is not None:
            answer_join(core, group, member, JoinGroupResponse(E.unknown_member_id, ""))
        remove_member(core, group, member_id)
    prepare_rebalance(core, group)
