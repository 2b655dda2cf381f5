"""ShareGroupHeartbeat (76) v1: join, heartbeat, leave, session expiry.

Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` in small steps:

1. validate (member id given by the client, epoch 0 joins with a subscription, -1 leaves);
2. find or create the group; a member heartbeating with epoch > 0 must exist and send its
   current (or previous, when the last answer was lost) epoch, else FENCED_MEMBER_EPOCH;
3. a new member, a changed subscription or rack, or changed subscribed-topic metadata
   bumps the group epoch (ShareGroupMemberMetadata, ShareGroupMetadata records);
4. a group epoch past the assignment epoch computes a new target with the ``simple``
   assignor (ShareGroupTargetAssignmentMember/Metadata records);
5. the member takes its target at once (no revocation: partitions may be shared) at the
   assignment epoch (ShareGroupCurrentMemberAssignment) and its session timer restarts.

The answer carries the whole assignment when it changed or the request was a full one.
A member that leaves or whose session (the group's ``share.session.timeout.ms``, else
``group.share.session.timeout.ms``) expires is removed with tombstones and the group epoch
bumps.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import ShareGroupHeartbeat
from samsa.coordinator.responses import ShareGroupHeartbeatResponse
from samsa.coordinator.share import record_factory as records
from samsa.coordinator.share.assignor import assign
from samsa.coordinator.share.group import (
    SHARE_GROUP_TYPE,
    ShareGroup,
    ShareMember,
    to_topic_partitions,
)
from samsa.coordinator.timers import TimerKind

E = ErrorCode
LEAVE_EPOCH = -1


def handle_heartbeat(core: ShardCore, ev: ShareGroupHeartbeat, token: object) -> None:
    error = _validate(ev)
    if error is not None:
        core.reply(token, ShareGroupHeartbeatResponse(E.invalid_request, error))
        return
    gid = ev.group_id
    found = core.find_group(gid)
    if found is not None and found[0].group_type != SHARE_GROUP_TYPE:
        core.reply(token, ShareGroupHeartbeatResponse(
            E.group_id_not_found, f"Group {gid} is not a share group."))
        return
    group = core.hard.share.groups.get(gid)
    if ev.member_epoch == LEAVE_EPOCH:
        if group is not None and ev.member_id in group.members:
            remove_member(core, group, ev.member_id)
        core.reply(token, ShareGroupHeartbeatResponse(E.none, None, ev.member_id, LEAVE_EPOCH))
        return
    if group is None and ev.member_epoch != 0:
        core.reply(token, ShareGroupHeartbeatResponse(
            E.group_id_not_found, f"Group {gid} not found."))
        return
    member = None if group is None else group.members.get(ev.member_id)
    if member is None and ev.member_epoch != 0:
        core.reply(token, ShareGroupHeartbeatResponse(
            E.unknown_member_id, f"Member {ev.member_id} is not a member of group {gid}."))
        return
    if member is not None and ev.member_epoch not in (0, member.member_epoch,
                                                      member.previous_member_epoch):
        core.reply(token, ShareGroupHeartbeatResponse(
            E.fenced_member_epoch, f"The share group member has a stale member epoch "
                                   f"({ev.member_epoch}); the current epoch is "
                                   f"{member.member_epoch}."))
        return
    if member is None and group is not None and len(group.members) >= core.config.share_max_size:
        core.reply(token, ShareGroupHeartbeatResponse(
            E.group_max_size_reached,
            f"The share group has reached its maximum capacity of "
            f"{core.config.share_max_size} members."))
        return
    if group is None:
        core.write(*records.group_epoch(gid, 0))
        group = core.hard.share.groups[gid]
    member, changed = _updated_member(group, member, ev)
    if changed:
        core.write(*records.member_subscription(gid, member))
    metadata_hash = _metadata_hash(core, group)
    if changed or metadata_hash != group.metadata_hash:
        bump_epoch(core, group, metadata_hash)
    if group.epoch > group.assignment_epoch:
        _compute_target(core, group)
    assignment_changed = _reconcile(core, group, ev.member_id)
    _schedule_session(core, group, ev.member_id)
    full = ev.member_epoch == 0 or ev.subscribed_topic_names is not None
    current = group.members[ev.member_id]
    core.reply(token, ShareGroupHeartbeatResponse(
        E.none, None, ev.member_id, current.member_epoch,
        core.config.share_heartbeat_interval_for(gid),
        to_topic_partitions(current.assigned) if assignment_changed or full else None))


def _validate(ev: ShareGroupHeartbeat) -> str | None:
    if ev.group_id == "":
        return "GroupId can't be empty."
    if ev.member_id.strip() == "":
        return "MemberId can't be empty."
    if ev.member_epoch < LEAVE_EPOCH:
        return f"MemberEpoch is {ev.member_epoch}, but must be greater than or equal to -1."
    if ev.member_epoch == 0 and not ev.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    return None


def _updated_member(group: ShareGroup, member: ShareMember | None,
                    ev: ShareGroupHeartbeat) -> tuple[ShareMember, bool]:
    fresh = member is None
    new = ShareMember(ev.member_id) if member is None else ShareMember(
        member.member_id, member.rack_id, member.client_id, member.client_host,
        member.subscribed_topic_names, member.member_epoch, member.previous_member_epoch,
        dict(member.assigned))
    if ev.rack_id is not None:
        new.rack_id = ev.rack_id
    if ev.subscribed_topic_names is not None:
        new.subscribed_topic_names = tuple(sorted(set(ev.subscribed_topic_names)))
    new.client_id, new.client_host = ev.client_id, ev.client_host
    changed = fresh or member is None or new.metadata_value() != member.metadata_value()
    return new, changed


def _metadata_hash(core: ShardCore, group: ShareGroup) -> int:
    by_name = core.topics.by_name
    ids = [by_name[t].topic_id for t in group.subscribed_topic_names() if t in by_name]
    return core.topics.metadata_hash(ids)


def bump_epoch(core: ShardCore, group: ShareGroup, metadata_hash: int | None = None) -> None:
    mh = group.metadata_hash if metadata_hash is None else metadata_hash
    core.write(*records.group_epoch(group.group_id, group.epoch + 1, mh))


def _compute_target(core: ShardCore, group: ShareGroup) -> None:
    gid = group.group_id
    target = assign({m.member_id: m.subscribed_topic_names for m in group.members.values()},
                    core.topics.by_name, group.target)
    for mid in [m for m in group.target if m not in target]:
        core.write(*records.target_member_tombstone(gid, mid))
    for mid, assignment in target.items():
        if group.target.get(mid) != assignment:
            core.write(*records.target_member(gid, mid, assignment))
    core.write(*records.target_epoch(gid, group.epoch))


def _reconcile(core: ShardCore, group: ShareGroup, mid: str) -> bool:
    member = group.members[mid]
    if member.member_epoch == group.assignment_epoch:
        return False
    target = group.target.get(mid, {})
    changed = target != member.assigned
    moved = ShareMember(mid, member.rack_id, member.client_id, member.client_host,
                        member.subscribed_topic_names, group.assignment_epoch,
                        member.member_epoch, dict(target))
    core.write(*records.current_assignment(group.group_id, moved))
    return changed


def _schedule_session(core: ShardCore, group: ShareGroup, mid: str) -> None:
    core.schedule(TimerKind.SHARE_SESSION, group.group_id, mid,
                  core.config.share_session_timeout_for(group.group_id))


def remove_member(core: ShardCore, group: ShareGroup, mid: str) -> None:
    """Tombstones for the member's assignment, target and metadata; the group epoch bumps."""
    gid = group.group_id
    core.cancel(TimerKind.SHARE_SESSION, gid, mid)
    for key, value in records.member_tombstones(gid, mid, mid in group.target):
        core.write(key, value)
    bump_epoch(core, group)


def session_expired(core: ShardCore, group_id: str, member_id: str) -> None:
    group = core.hard.share.groups.get(group_id)
    if group is not None and member_id in group.members:
        remove_member(core, group, member_id)


def arm_loaded_timers(core: ShardCore) -> None:
    """After a load every member gets a full session to heartbeat again."""
    for group in core.hard.share.groups.values():
        for mid in group.members:
            _schedule_session(core, group, mid)
