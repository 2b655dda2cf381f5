"""Classic group APIs on consumer groups (online migration, Kafka 4.x
``GroupMetadataManager``): the consumer family (:mod:`.family`) answers them with these.

* JoinGroup: an Empty consumer group is deleted and the join creates a classic group; a
  live one takes the member in as a classic member (:mod:`.classic_members`).
* SyncGroup, Heartbeat: answered for classic members (:mod:`.classic_members`);
  UNKNOWN_MEMBER_ID for others. LeaveGroup removes classic members, and any member by
  instance id (admin removal); a consumer-protocol member id gets UNKNOWN_MEMBER_ID. When
  only classic members remain, the group becomes classic again (:mod:`.migrate`).

Offsets and DeleteGroups of consumer groups go the one path of every group type
(:mod:`samsa.coordinator.offsets`, :mod:`samsa.coordinator.admin`), asking the group
(:mod:`.commits`: KIP-1251's commit checks).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import join as classic_join
from samsa.coordinator.consumer import classic_members, heartbeat
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import NO_MEMBER_ID, Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from samsa.coordinator.responses import LeaveGroupMemberResponse, LeaveGroupResponse

E = ErrorCode


def join(core: ShardCore, ev: JoinGroup, token: object) -> None:
    """JoinGroup naming a consumer group: a live one takes the member in as a classic member
    (:mod:`.classic_members`); an empty one is deleted and the join creates a classic
    group."""
    group = core.hard.consumer.groups[ev.group_id]
    if not group.is_empty():
        classic_members.join(core, group, ev, token)
        return
    core.cancel_group_timers(group.group_id)
    for key in group.group_tombstone_keys():
        core.write(key, None)
    classic_join.handle_join(core, ev, token)


def sync(core: ShardCore, ev: SyncGroup, token: object) -> None:
    classic_members.sync(core, core.hard.consumer.groups[ev.group_id], ev, token)


def heartbeat_(core: ShardCore, ev: Heartbeat, token: object) -> None:
    classic_members.heartbeat(core, core.hard.consumer.groups[ev.group_id], ev, token)


def leave(core: ShardCore, ev: LeaveGroup, token: object) -> None:
    _leave(core, core.hard.consumer.groups[ev.group_id], ev, token)


def _leave(core: ShardCore, group: ConsumerGroup, ev: LeaveGroup, token: object) -> None:
    answers = []
    fenced: list[str] = []
    for m in ev.members:
        if m.group_instance_id is None:
            member = group.members.get(m.member_id)
            member_id = m.member_id
            if member is None or member.classic is None:
                error = E.unknown_member_id
            else:
                error = E.none
                if member_id not in fenced:
                    fenced.append(member_id)
        else:
            static = group.static_member(m.group_instance_id)
            if static is None:
                error, member_id = E.unknown_member_id, m.member_id
            elif m.member_id != NO_MEMBER_ID and m.member_id != static.member_id:
                error, member_id = E.fenced_instance_id, m.member_id
            elif m.member_id != NO_MEMBER_ID and static.classic is None:
                # the member exists but uses the consumer protocol
                error, member_id = E.unknown_member_id, m.member_id
            else:
                error, member_id = E.none, static.member_id
                if member_id not in fenced:
                    fenced.append(member_id)
        answers.append(LeaveGroupMemberResponse(member_id, m.group_instance_id, error))
    if fenced:
        heartbeat.fence_members(core, group, fenced)
    core.reply(token, LeaveGroupResponse(E.none, tuple(answers)))
