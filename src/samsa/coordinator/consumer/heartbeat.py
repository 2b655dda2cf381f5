"""ConsumerGroupHeartbeat (API 68): join (epoch 0), heartbeat, leave (-1), static leave (-2).

The order of checks and the errors follow Kafka's ``GroupCoordinatorService`` (request
validation) and ``GroupMetadataManager.consumerGroupHeartbeat``. Every check runs before
the first record is written, so a refused request writes nothing. Then, as in Kafka:

1. the member is created or updated (member metadata record); the group epoch is bumped
   when subscriptions, resolved regexes, membership or the subscribed topics' metadata
   (their hash) changed (group metadata record);
2. when the group epoch passes the assignment epoch, a new target assignment is asked for
   (:mod:`.batching`: a background job, at most one per ``consumer.assignment.interval.ms``);
3. the member reconciles towards the current target (current member assignment record) and
   is answered. Only when the group computes its targets inline
   (``consumer.assignor.offload.enable=false``) and this heartbeat started that job is the
   answer parked until the job lands, and made from the new target.

Regular expressions are resolved in background jobs too (:mod:`.regex_refresh`, Kafka's
conditions: at most every 10 s per group, when one is unresolved, when topics appeared, and
every ``group.consumer.regex.refresh.interval.ms``), among the topics the member whose
heartbeat asked may describe (``ConsumerGroupHeartbeat.describable``, KAFKA-18813). A member
that subscribes to a regex is assigned its topics once the resolution has landed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from samsa.coordinator import rebalance as rb
from samsa.coordinator import record_factory as classic_records
from samsa.coordinator.consumer import batching, migrate, regex_refresh
from samsa.coordinator.consumer import record_factory as records
from samsa.coordinator.consumer import regex as rx
from samsa.coordinator.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    from_topic_partitions,
    stamp_epochs,
    to_topic_partitions,
)
from samsa.coordinator.consumer.reconcile import FencedMemberEpoch, reconcile
from samsa.coordinator.consumer.target import assignors, subscribed_ids
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import ConsumerGroupHeartbeat
from samsa.coordinator.group import Group
from samsa.coordinator.jobs import Waiting
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse
from samsa.coordinator.state import GroupState
from samsa.coordinator.timers import TimerKind

E = ErrorCode

#: ConsumerGroupHeartbeat v1+: the client generates its member id.
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def handle_heartbeat(core: ShardCore, ev: ConsumerGroupHeartbeat, token: object) -> None:
    try:
        response = _handle(core, ev, token)
    except HeartbeatError as err:
        response = ConsumerGroupHeartbeatResponse(err.code, err.message)
    if response is not None:
        core.reply(token, response)


def _handle(core: ShardCore, ev: ConsumerGroupHeartbeat,
            token: object) -> ConsumerGroupHeartbeatResponse | None:
    if not core.config.consumer_protocol_enabled:
        raise HeartbeatError(E.unsupported_version, "The consumer group protocol is disabled.")
    validate_request(core, ev)
    if ev.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
        return leave(core, ev)
    return heartbeat(core, ev, token)


# ---------------------------------------------------------------------- validation


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(E.invalid_request, message)


def validate_request(core: ShardCore, ev: ConsumerGroupHeartbeat) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
    if (ev.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION or ev.member_epoch > 0
            or ev.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and ev.member_id == "":
        raise _invalid("MemberId can't be empty.")
    if ev.group_id == "":
        raise _invalid("GroupId can't be empty.")
    if ev.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if ev.rack_id == "":
        raise _invalid("RackId can't be empty.")
    if ev.member_epoch == 0:
        if ev.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if ev.topic_partitions is None or ev.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if ev.subscribed_topic_names is None and ev.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                           "non-null when (re-)joining.")
    elif ev.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if ev.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif ev.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    names = assignors(core.config.consumer_assignors)
    if ev.server_assignor is not None and ev.server_assignor not in names:
        raise HeartbeatError(
            E.unsupported_assignor,
            f"ServerAssignor {ev.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(names)}.",
        )


def _check_epoch(member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid`` (epoch 0 always rejoins,
    KAFKA-19233): a member one epoch behind whose bump was lost may go on if it owns no
    more than its assignment."""
    if epoch == 0:
        return
    if epoch > member.member_epoch:
        raise HeartbeatError(
            E.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )
    if epoch < member.member_epoch and (
        epoch != member.previous_member_epoch or owned is None
        or any(not ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
    ):
        raise HeartbeatError(
            E.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )


# ---------------------------------------------------------------------- lookups


@dataclass
class _Plan:
    """What a heartbeat will do, decided before anything is written."""

    group: ConsumerGroup | None
    classic_to_delete: Group | None
    member: ConsumerMember
    is_new_member: bool
    replaces: ConsumerMember | None = None
    #: a live classic group this join converts (online upgrade)
    classic_to_upgrade: Group | None = None


def _static_of(members: dict[str, ConsumerMember], instance_id: str) -> ConsumerMember | None:
    return next((m for m in members.values() if m.instance_id == instance_id), None)


def _plan(core: ShardCore, ev: ConsumerGroupHeartbeat, member_id: str) -> _Plan:
    gid = ev.group_id
    group = core.hard.consumer.groups.get(gid)
    classic = core.groups.get(gid)
    classic_to_delete = classic_to_upgrade = None
    joining = ev.member_epoch == 0
    members: dict[str, ConsumerMember] = {} if group is None else group.members
    if group is None:
        if classic is not None:
            if not joining:
                raise HeartbeatError(E.group_id_not_found, f"Group {gid} is not a consumer group")
            if classic.is_(GroupState.EMPTY):
                classic_to_delete = classic
            else:
                try:
                    upgraded = migrate.upgraded_members(core, classic)
                except migrate.UpgradeRefused as exc:
                    raise HeartbeatError(E.group_id_not_found, str(exc)) from exc
                classic_to_upgrade = classic
                members = {m.member_id: m for m in upgraded}
        elif not joining:
            raise HeartbeatError(E.group_id_not_found, f"Consumer group {gid} not found.")
    if len(members) >= core.config.consumer_max_size and (
        ev.member_id == "" or ev.member_id not in members
    ):
        raise HeartbeatError(
            E.group_max_size_reached,
            "The consumer group has reached its maximum capacity of "
            f"{core.config.consumer_max_size} members.",
        )
    owned = None if ev.topic_partitions is None else from_topic_partitions(ev.topic_partitions)
    if ev.instance_id is None:
        member = members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(
                    E.unknown_member_id,
                    f"Member {member_id} is not a member of group {gid}.")
            return _Plan(group, classic_to_delete, ConsumerMember(member_id), True,
                         classic_to_upgrade=classic_to_upgrade)
        _check_epoch(member, ev.member_epoch, owned)
        return _Plan(group, classic_to_delete, member, False)
    static = _static_of(members, ev.instance_id)
    if joining:
        if static is None:
            member = members.get(member_id)
            return _Plan(group, classic_to_delete, member or ConsumerMember(member_id),
                         member is None, classic_to_upgrade=classic_to_upgrade)
        if static.classic is None and static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise HeartbeatError(
                E.unreleased_instance_id,
                f"Static member {member_id} with instance id {ev.instance_id} cannot join "
                f"the group because the instance id is owned by {static.member_id} member.",
            )
        new = replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        return _Plan(group, classic_to_delete, new, True, replaces=static,
                     classic_to_upgrade=classic_to_upgrade)
    if static is None:
        raise HeartbeatError(E.unknown_member_id, f"Instance id {ev.instance_id} is unknown.")
    if static.member_id != member_id:
        raise HeartbeatError(
            E.fenced_instance_id,
            f"Static member {member_id} with instance id {ev.instance_id} was fenced by "
            f"member {static.member_id}.",
        )
    _check_epoch(static, ev.member_epoch, owned)
    return _Plan(group, classic_to_delete, static, False)


def _updated(member: ConsumerMember, ev: ConsumerGroupHeartbeat) -> ConsumerMember:
    """Kafka's ``ConsumerGroupMember.Builder.maybeUpdate*``: null means unchanged. A
    heartbeat that changes nothing (a steady one) gets ``member`` itself, not a copy."""
    if (member.classic is None and ev.client_id == member.client_id
            and ev.client_host == member.client_host
            and ev.instance_id in (None, member.instance_id)
            and ev.rack_id in (None, member.rack_id)
            and ev.rebalance_timeout_ms in (-1, member.rebalance_timeout_ms)
            and ev.server_assignor in (None, member.server_assignor)
            and ev.subscribed_topic_regex in (None, member.subscribed_topic_regex)
            and (ev.subscribed_topic_names is None
                 or tuple(ev.subscribed_topic_names) == member.subscribed_topic_names)):
        return member
    return replace(
        member,
        instance_id=member.instance_id if ev.instance_id is None else ev.instance_id,
        rack_id=member.rack_id if ev.rack_id is None else ev.rack_id,
        rebalance_timeout_ms=(member.rebalance_timeout_ms if ev.rebalance_timeout_ms == -1
                              else ev.rebalance_timeout_ms),
        server_assignor=(member.server_assignor if ev.server_assignor is None
                         else ev.server_assignor),
        subscribed_topic_names=(member.subscribed_topic_names
                                if ev.subscribed_topic_names is None
                                else tuple(ev.subscribed_topic_names)),
        subscribed_topic_regex=(member.subscribed_topic_regex
                                if ev.subscribed_topic_regex is None
                                else ev.subscribed_topic_regex),
        client_id=ev.client_id,
        client_host=ev.client_host,
        classic=None,
    )


# ---------------------------------------------------------------------- heartbeat


def heartbeat(core: ShardCore, ev: ConsumerGroupHeartbeat,
              token: object = None) -> ConsumerGroupHeartbeatResponse | None:
    """A join or heartbeat; None when its answer is parked on an inline target job (it
    comes with the job's completion)."""
    gid = ev.group_id
    member_id = ev.member_id or core.new_member_id(ev.client_id or "consumer")
    plan = _plan(core, ev, member_id)
    old = plan.member
    updated = _updated(old, ev)
    new_regex = updated.subscribed_topic_regex
    if new_regex and new_regex != old.subscribed_topic_regex and (
        plan.group is None or new_regex not in plan.group.subscribed_regexes()
    ):
        message = rx.validate(new_regex)
        if message is not None:
            raise HeartbeatError(E.invalid_regular_expression, message)

    # Nothing was written so far; from here on the heartbeat succeeds.
    if plan.classic_to_delete is not None:
        rb.remove_group(core, plan.classic_to_delete)
        if gid in core.hard.groups:
            core.write(*classic_records.group_tombstone(gid))
    if plan.classic_to_upgrade is not None:
        migrate.convert_to_consumer(core, plan.classic_to_upgrade)
        plan.group = core.hard.consumer.groups[gid]
    if plan.replaces is not None:
        assert plan.group is not None
        replace_member(core, plan.group, plan.replaces, old)
    bump = plan.group is None or plan.group.epoch == 0
    if plan.is_new_member or (updated is not old and not updated.same_subscription(old)):
        core.write(*records.member_subscription(gid, updated))
        bump |= updated.subscribed_topic_names != old.subscribed_topic_names
    group = core.hard.consumer.groups[gid]
    bump |= regex_refresh.subscription_changed(core, group, old.subscribed_topic_regex,
                                               new_regex)
    bump_epoch(core, group, bump)
    job = batching.request_target(core, group)
    regex_refresh.maybe_refresh(core, group, ev.describable)
    schedule_session(core, gid, member_id)
    owned = None if ev.topic_partitions is None else from_topic_partitions(ev.topic_partitions)
    old_assigned = old.assigned  # members are replaced, never changed in place

    def answer() -> ConsumerGroupHeartbeatResponse:
        return _answer(core, ev, member_id, owned, old_assigned)

    if job is not None and not job.offload:
        core.park(gid, Waiting(token, ev, answer))
        return None
    return answer()


def _answer(core: ShardCore, ev: ConsumerGroupHeartbeat, member_id: str,
            owned: Assignment | None,
            old_assigned: Assignment) -> ConsumerGroupHeartbeatResponse:
    """Reconcile the member towards the current target and answer its heartbeat."""
    gid = ev.group_id
    group = core.hard.consumer.groups.get(gid)
    member = None if group is None else group.members.get(member_id)
    if group is None or member is None:  # gone while its answer was parked
        return ConsumerGroupHeartbeatResponse(
            E.unknown_member_id, f"Member {member_id} is not a member of group {gid}.")
    try:
        member = reconcile_member(core, group, member, owned)
    except HeartbeatError as err:
        return ConsumerGroupHeartbeatResponse(err.code, err.message)
    full = ev.member_epoch == 0 or (
        ev.rebalance_timeout_ms != -1
        and ev.subscribed_topic_names is not None
        and ev.topic_partitions is not None
    )
    changed = member.assigned is not old_assigned and member.assigned != old_assigned
    return ConsumerGroupHeartbeatResponse(
        E.none,
        member_id=member_id,
        member_epoch=member.member_epoch,
        heartbeat_interval_ms=core.config.consumer_heartbeat_interval_for(gid),
        assignment=to_topic_partitions(member.assigned) if full or changed else None,
    )


def replace_member(core: ShardCore, group: ConsumerGroup, old: ConsumerMember,
                    new: ConsumerMember) -> None:
    """A static member rejoins under a new member id: it takes over the old member's
    target and current assignment (Kafka's ``replaceMember``)."""
    gid = group.group_id
    target = group.target.get(old.member_id, {})
    _write_member_tombstones(core, gid, old.member_id)
    cancel_member_timers(core, gid, old.member_id)
    core.write(*records.member_subscription(gid, new))
    core.write(*records.target_member(gid, new.member_id, target))
    core.write(*records.current_assignment(gid, new))


def _write_member_tombstones(core: ShardCore, gid: str, member_id: str) -> None:
    """Kafka's ``removeMember``: the order matters for replay."""
    for key, value in records.member_tombstones(gid, member_id):
        core.write(key, value)


def bump_epoch(core: ShardCore, group: ConsumerGroup, bump: bool) -> None:
    """Write the next group epoch if ``bump`` or the subscribed topics' metadata hash
    changed (Kafka 4.1's ``MetadataHash``)."""
    topics = core.topics
    key = (topics.version, group.epoch, len(group.members))
    if not bump and group.hash_checked == key:
        return
    ids: set[uuid.UUID] = set()
    for m in group.members.values():
        ids |= subscribed_ids(group, m, topics)
    metadata_hash = topics.metadata_hash(ids)
    if bump or metadata_hash != group.metadata_hash:
        core.write(*records.group_epoch(group.group_id, group.epoch + 1, metadata_hash))
    group.hash_checked = (topics.version, group.epoch, len(group.members))


def reconcile_member(core: ShardCore, group: ConsumerGroup, member: ConsumerMember,
                     owned: Assignment | None) -> ConsumerMember:
    """Kafka's ``maybeReconcile``, with the rebalance timeout of a revoking member (classic
    members have join and sync timeouts instead)."""
    if member.is_reconciled_to(group.assignment_epoch):
        return member
    try:
        new = reconcile(
            member, group.assignment_epoch, group.target.get(member.member_id, {}),
            group.partition_epoch, owned, subscribed_ids(group, member, core.topics),
        )
    except FencedMemberEpoch as exc:
        raise HeartbeatError(E.fenced_member_epoch, str(exc)) from exc
    if new == member:
        return member
    gid = group.group_id
    core.write(*records.current_assignment(gid, new))
    if new.classic is None and new.state is MemberState.UNREVOKED_PARTITIONS:
        group.revoking_epochs[new.member_id] = new.member_epoch
        core.schedule(TimerKind.CONSUMER_REBALANCE, gid, new.member_id,
                      max(new.rebalance_timeout_ms, 0))
    elif new.classic is None:
        group.revoking_epochs.pop(new.member_id, None)
        core.cancel(TimerKind.CONSUMER_REBALANCE, gid, new.member_id)
    return group.members[new.member_id]


# ---------------------------------------------------------------------- leaving, fencing


def leave(core: ShardCore, ev: ConsumerGroupHeartbeat) -> ConsumerGroupHeartbeatResponse:
    gid = ev.group_id
    group = core.hard.consumer.groups.get(gid)
    if group is None:
        if gid in core.groups:
            raise HeartbeatError(E.group_id_not_found, f"Group {gid} is not a consumer group")
        raise HeartbeatError(E.group_id_not_found, f"Group {gid} not found.")
    if ev.instance_id is None:
        member = group.members.get(ev.member_id)
        if member is None:
            raise HeartbeatError(
                E.unknown_member_id, f"Member {ev.member_id} is not a member of group {gid}.")
    else:
        static = group.static_member(ev.instance_id)
        if static is None:
            raise HeartbeatError(E.unknown_member_id, f"Instance id {ev.instance_id} is unknown.")
        if static.member_id != ev.member_id:
            raise HeartbeatError(
                E.fenced_instance_id,
                f"Static member {ev.member_id} with instance id {ev.instance_id} was fenced "
                f"by member {static.member_id}.",
            )
        member = static
        if ev.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It keeps its partitions for its instance id, at assignment epoch 0 (Kafka's
            # resetAssignedPartitionsEpochsToZero): the member that rejoins with the instance
            # id starts from epoch 0 and may commit them at once.
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                              pending_revocation={},
                              assignment_epochs=stamp_epochs((member.assigned,), {}, 0))
            core.write(*records.current_assignment(gid, leaving))
            return ConsumerGroupHeartbeatResponse(
                E.none, member_id=member.member_id,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    fence_members(core, group, [member.member_id])
    return ConsumerGroupHeartbeatResponse(E.none, member_id=ev.member_id,
                                          member_epoch=ev.member_epoch)


def fence_members(core: ShardCore, group: ConsumerGroup, member_ids: list[str]) -> None:
    """Kafka's ``consumerGroupFenceMembers``: remove the members and bump the epoch, or
    downgrade the group when only classic members remain."""
    if not member_ids:
        return
    if migrate.downgrades_without(core, group, member_ids):
        migrate.convert_to_classic(core, group, member_ids)
        return
    gid = group.group_id
    regexes = {group.members[m].subscribed_topic_regex for m in member_ids}
    for mid in member_ids:
        _write_member_tombstones(core, gid, mid)
        cancel_member_timers(core, gid, mid)
    for regex in regexes:
        if regex:
            regex_refresh.drop_unused(core, group, regex)
    bump_epoch(core, group, True)
    if not group.members:  # KAFKA-20442: an empty group's assignment epoch catches up
        core.write(*records.target_epoch(gid, group.epoch, group.assignment_timestamp))
    batching.request_target(core, group)


def cancel_member_timers(core: ShardCore, gid: str, member_id: str) -> None:
    core.cancel(TimerKind.CONSUMER_SESSION, gid, member_id)
    core.cancel(TimerKind.CONSUMER_REBALANCE, gid, member_id)
    core.cancel(TimerKind.CONSUMER_JOIN, gid, member_id)
    core.cancel(TimerKind.CONSUMER_SYNC, gid, member_id)


def schedule_session(core: ShardCore, gid: str, member_id: str) -> None:
    core.schedule(TimerKind.CONSUMER_SESSION, gid, member_id,
                  core.config.consumer_session_timeout_for(gid))


# ---------------------------------------------------------------------- timers and loading


def session_expired(core: ShardCore, gid: str, member_id: str) -> None:
    group = core.hard.consumer.groups.get(gid)
    if group is not None and member_id in group.members:
        fence_members(core, group, [member_id])


def rebalance_expired(core: ShardCore, gid: str, member_id: str) -> None:
    """A member did not revoke its partitions within its rebalance timeout."""
    group = core.hard.consumer.groups.get(gid)
    if group is None:
        return
    member = group.members.get(member_id)
    expected = group.revoking_epochs.pop(member_id, None)
    if member is not None and member.member_epoch == expected:
        fence_members(core, group, [member_id])


def arm_loaded_timers(core: ShardCore) -> None:
    """After a load: every member gets a session timeout; revoking ones their rebalance
    timeout (as Kafka's ``onLoaded``); a group still short of its target asks for it."""
    for gid, group in core.hard.consumer.groups.items():
        for mid, member in group.members.items():
            schedule_session(core, gid, mid)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                group.revoking_epochs[mid] = member.member_epoch
                core.schedule(TimerKind.CONSUMER_REBALANCE, gid, mid,
                              max(member.rebalance_timeout_ms, 0))
    batching.arm_loaded(core)
