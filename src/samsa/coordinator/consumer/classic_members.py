"""Classic-protocol members inside a consumer group (after an online upgrade).

The coordinator answers their JoinGroup, SyncGroup and Heartbeat from the consumer group's
model, as Kafka 4.x's ``classicGroupJoinToConsumerGroup``,
``classicGroupSyncToConsumerGroup`` and ``classicGroupHeartbeatToConsumerGroup`` do:

* JoinGroup updates the member (its ConsumerProtocolSubscription: topics, rack, owned
  partitions; session timeout and protocols in :class:`ClassicMemberMetadata`), may bump
  the group epoch and ask for a new target (:mod:`.batching`), reconciles the member with
  the partitions it reports owning, and answers at once (or, when the group computes its
  targets inline, once the target this join asked for has landed): generation = member
  epoch, protocol type
  ``consumer``, the member's first protocol, no leader. A sync timeout (rebalance timeout)
  is armed; the session timer uses the JoinGroup's session timeout. A static member that
  replaces the group's last consumer-protocol member (same instance id) turns the group
  back into a Stable classic group at once (Kafka's
  ``validateOnlineDowngradeWithReplacedMember``), which the member then syncs with.
* SyncGroup checks member, generation and protocol, answers REBALANCE_IN_PROGRESS while the
  assignment epoch is ahead of a member that is not revoking, else the member's assigned
  partitions as a ConsumerProtocolAssignment (at its subscription's version).
* Heartbeat renews the session and answers REBALANCE_IN_PROGRESS when the member must
  rejoin: its epoch is behind the assignment epoch, it must revoke, or partitions it waited
  for are free. (Kafka 4.x compares with the group epoch; with KIP-1263's batching the
  group epoch runs ahead of the target until the next computation, and a rejoin before
  then would only be answered with the same generation again.) Each REBALANCE_IN_PROGRESS
  arms a join timeout (rebalance timeout) if none is.

A classic member is fenced like any member when its session, join or sync timeout fires.
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from samsa.assignors.codec import ConsumerProtocolError, decode_subscription
from samsa.coordinator.consumer import batching, migrate
from samsa.coordinator.consumer import record_factory as records
from samsa.coordinator.consumer.group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from samsa.coordinator.consumer.heartbeat import (
    HeartbeatError,
    bump_epoch,
    reconcile_member,
    replace_member,
)
from samsa.coordinator.consumer.records import (
    ClassicMemberMetadata,
)
from samsa.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import NO_MEMBER_ID, Heartbeat, JoinGroup, SyncGroup
from samsa.coordinator.jobs import Waiting
from samsa.coordinator.responses import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from samsa.coordinator.timers import TimerKind

E = ErrorCode


def member_of(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """Kafka's ``validateConsumerGroupMember``: UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(E.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        return member
    static = group.static_member(instance_id)
    if static is None:
        raise HeartbeatError(E.unknown_member_id, f"Member with instance id {instance_id} is "
                             f"not a member of group {group.group_id}.")
    if static.member_id != member_id:
        raise HeartbeatError(E.fenced_instance_id, f"Static member {member_id} with instance "
                             f"id {instance_id} was fenced by member {static.member_id}.")
    return static


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None,
                    generation: int) -> ConsumerMember:
    member = member_of(group, member_id, instance_id)
    if member.classic is None:
        raise HeartbeatError(E.unknown_member_id,
                             f"Member {member.member_id} does not use the classic protocol.")
    if generation != member.member_epoch:
        raise HeartbeatError(E.illegal_generation)
    return member


def _join_timeout_if_absent(core: ShardCore, gid: str, member: ConsumerMember) -> None:
    if not core.is_scheduled(TimerKind.CONSUMER_JOIN, gid, member.member_id):
        core.schedule(TimerKind.CONSUMER_JOIN, gid, member.member_id,
                      max(member.rebalance_timeout_ms, 0))


# ---------------------------------------------------------------------- JoinGroup


def join(core: ShardCore, group: ConsumerGroup, ev: JoinGroup, token: object) -> None:
    try:
        response = _join(core, group, ev, token)
    except HeartbeatError as err:
        response = JoinGroupResponse(err.code, ev.member_id)
    if response is not None:
        core.reply(token, response)


def _join(core: ShardCore, group: ConsumerGroup, ev: JoinGroup,
          token: object) -> JoinGroupResponse | None:
    """None: the answer is parked on an inline target job (:mod:`.batching`)."""
    cfg = core.config
    gid = group.group_id
    if not cfg.min_session_timeout_ms <= ev.session_timeout_ms <= cfg.max_session_timeout_ms:
        raise HeartbeatError(E.invalid_session_timeout)
    unknown = ev.member_id == NO_MEMBER_ID
    instance_id = ev.group_instance_id
    member_id = core.new_member_id(instance_id or ev.client_id) if unknown else ev.member_id
    if len(group.members) >= cfg.consumer_max_size and member_id not in group.members:
        raise HeartbeatError(E.group_max_size_reached)
    if not group.supports_classic_protocols(ev.protocol_type, [n for n, _ in ev.protocols]):
        raise HeartbeatError(E.inconsistent_group_protocol)
    if unknown and instance_id is None and ev.require_known_member_id:
        return JoinGroupResponse(E.member_id_required, member_id)
    try:
        subscription = decode_subscription(ev.protocols[0][1])
    except ConsumerProtocolError as exc:
        raise HeartbeatError(E.inconsistent_group_protocol) from exc

    replaced: ConsumerMember | None = None
    if instance_id is None:
        old = group.members.get(member_id) or ConsumerMember(member_id)
    else:
        static = group.static_member(instance_id)
        if not unknown:
            if static is None:
                raise HeartbeatError(E.unknown_member_id)
            if static.member_id != member_id:
                raise HeartbeatError(E.fenced_instance_id)
            old = static
        elif static is None:
            old = ConsumerMember(member_id)
        else:  # from here on records are written
            replaced = static
            old = replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            replace_member(core, group, static, old)
    is_new = old.member_id not in group.members
    updated = replace(
        old,
        instance_id=instance_id if instance_id is not None else old.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else old.rack_id,
        rebalance_timeout_ms=(old.rebalance_timeout_ms if ev.rebalance_timeout_ms == -1
                              else ev.rebalance_timeout_ms),
        subscribed_topic_names=tuple(subscription.topics),
        client_id=ev.client_id,
        client_host=ev.client_host,
        classic=ClassicMemberMetadata(ev.session_timeout_ms, tuple(ev.protocols)),
    )
    bump = False
    if is_new or replaced is not None or not updated.same_subscription(old):
        core.write(*records.member_subscription(gid, updated))
        bump = updated.subscribed_topic_names != old.subscribed_topic_names
    bump_epoch(core, group, bump)
    job = batching.request_target(core, group)
    owned = migrate.to_ids(subscription.owned_partitions, core.topics)

    def answer() -> JoinGroupResponse:
        return _answer_join(core, group, ev, member_id, owned, replaced)

    if job is not None and not job.offload:
        core.park(gid, Waiting(token, ev, answer))
        return None
    return answer()


def _answer_join(core: ShardCore, group: ConsumerGroup, ev: JoinGroup, member_id: str,
                 owned: Assignment, replaced: ConsumerMember | None) -> JoinGroupResponse:
    """Reconcile the joining member towards the current target and answer it."""
    gid = group.group_id
    member = group.members.get(member_id)
    if member is None or core.hard.consumer.groups.get(gid) is not group:
        return JoinGroupResponse(E.unknown_member_id, member_id)  # gone while parked
    try:
        member = reconcile_member(core, group, member, owned)
    except HeartbeatError as err:
        return JoinGroupResponse(err.code, member_id)
    if replaced is not None and migrate.downgrades_with_replaced_member(core, group, replaced):
        # The last consumer-protocol member was replaced: the group is classic again,
        # Stable, without a rebalance; the member syncs with it (Kafka 4.x).
        migrate.convert_to_classic(core, group, (), rebalance=False)
    else:
        core.cancel(TimerKind.CONSUMER_JOIN, gid, member_id)
        core.schedule(TimerKind.CONSUMER_SESSION, gid, member_id, ev.session_timeout_ms)
        core.schedule(TimerKind.CONSUMER_SYNC, gid, member_id,
                      max(ev.rebalance_timeout_ms, 0))
    return JoinGroupResponse(
        E.none,
        member_id=member_id,
        generation_id=member.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=member.classic_protocol_name,
        leader="",
    )


# ---------------------------------------------------------------------- SyncGroup


def sync(core: ShardCore, group: ConsumerGroup, ev: SyncGroup, token: object) -> None:
    try:
        response = _sync(core, group, ev)
    except HeartbeatError as err:
        response = SyncGroupResponse(err.code)
    core.reply(token, response)


def _sync(core: ShardCore, group: ConsumerGroup, ev: SyncGroup) -> SyncGroupResponse:
    member = _classic_member(group, ev.member_id, ev.group_instance_id, ev.generation_id)
    if ev.protocol_type is not None and ev.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise HeartbeatError(E.inconsistent_group_protocol)
    if ev.protocol_name is not None and ev.protocol_name != member.classic_protocol_name:
        raise HeartbeatError(E.inconsistent_group_protocol)
    gid = group.group_id
    if group.assignment_epoch > member.member_epoch and \
            member.state is not MemberState.UNREVOKED_PARTITIONS:
        _join_timeout_if_absent(core, gid, member)
        raise HeartbeatError(E.rebalance_in_progress)
    assert member.classic is not None
    core.cancel(TimerKind.CONSUMER_SYNC, gid, member.member_id)
    core.schedule(TimerKind.CONSUMER_SESSION, gid, member.member_id,
                  member.classic.session_timeout_ms)
    metadata = member.classic.supported_protocols[0][1]
    return SyncGroupResponse(E.none, migrate.encode_for(metadata, member.assigned, core.topics),
                             ev.protocol_type, ev.protocol_name)


# ---------------------------------------------------------------------- Heartbeat


def heartbeat(core: ShardCore, group: ConsumerGroup, ev: Heartbeat, token: object) -> None:
    try:
        error = _heartbeat(core, group, ev)
    except HeartbeatError as err:
        error = err.code
    core.reply(token, HeartbeatResponse(error))


def _heartbeat(core: ShardCore, group: ConsumerGroup, ev: Heartbeat) -> int:
    member = _classic_member(group, ev.member_id, ev.group_instance_id, ev.generation_id)
    assert member.classic is not None
    gid = group.group_id
    core.schedule(TimerKind.CONSUMER_SESSION, gid, member.member_id,
                  member.classic.session_timeout_ms)
    if (member.member_epoch < group.assignment_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member))):
        _join_timeout_if_absent(core, gid, member)
        return E.rebalance_in_progress
    return E.none

