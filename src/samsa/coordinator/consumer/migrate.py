"""Online migration between classic and consumer groups (Kafka 4.x, KIP-848).

*Upgrade*: the first consumer-protocol member (ConsumerGroupHeartbeat with epoch 0) of a
live classic group converts it when ``group.consumer.migration.policy`` allows upgrades,
the group's protocol type is ``consumer`` and it has at most ``group.consumer.max.size``
members (Kafka's ``validateOnlineUpgrade``, else GROUP_ID_NOT_FOUND). Parked JoinGroup and
SyncGroup requests get REBALANCE_IN_PROGRESS; the classic group gets its tombstone; each
classic member becomes a member carrying :class:`ClassicMemberMetadata`, at member epoch =
the classic generation, Stable, owning (current and target assignment) what the last
SyncGroup gave it (Kafka's ``ConsumerGroup.fromClassicGroup`` and
``createConsumerGroupRecords``). The heartbeat then goes on as for any join.

*Downgrade*: when members are fenced (left, expired) and every remaining member speaks the
classic protocol, the policy allows downgrades and at most ``group.max.size`` remain,
the consumer group gets its tombstones and a classic group is written in its place:
Stable at generation = group epoch, each member assigned what it holds (encoded at the
version of its subscription; Kafka writes the target assignment, the same once a member
has reconciled), then a rebalance starts (Kafka's
``validateOnlineDowngradeWithFencedMembers``, ``convertToClassicGroup``,
``ClassicGroup.fromConsumerGroup``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.assignors.codec import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from samsa.assignors.interface import Assignment as ClassicAssignment
from samsa.coordinator import rebalance as rb
from samsa.coordinator import record_factory as classic_records
from samsa.coordinator.consumer import record_factory as records
from samsa.coordinator.consumer.group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    stamp_epochs,
)
from samsa.coordinator.consumer.records import (
    ClassicMemberMetadata,
)
from samsa.coordinator.consumer.topics import TopicsSnapshot
from samsa.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from samsa.coordinator.core import ShardCore
from samsa.coordinator.group import Group, Member
from samsa.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from samsa.coordinator.state import GroupState
from samsa.coordinator.timers import TimerKind

E = ErrorCode


class UpgradeRefused(Exception):
    """The classic group cannot become a consumer group (GROUP_ID_NOT_FOUND)."""


# ---------------------------------------------------------------------- assignments


def to_ids(partitions: Iterable[TopicPartition], topics: TopicsSnapshot) -> Assignment:
    """Topic-name partitions as topic ids; topics that do not exist are dropped."""
    out: dict[uuid.UUID, set[int]] = {}
    for topic, p in partitions:
        info = topics.by_name.get(topic)
        if info is not None:
            out.setdefault(info.topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def encode_for(member_metadata: bytes, assignment: Assignment, topics: TopicsSnapshot) -> bytes:
    """The ConsumerProtocolAssignment a classic member gets, at the version of its
    subscription (Kafka's ``ConsumerProtocol.serializeAssignment``, capped at v3)."""
    names = {info.topic_id: info.name for info in topics.topics.values()}
    partitions = sorted(TopicPartition(names[t], p) for t, ps in assignment.items()
                        if t in names for p in ps)
    version = 0
    if len(member_metadata) >= 2:
        version = max(0, min(int.from_bytes(member_metadata[:2], "big", signed=True), 3))
    return encode_assignment(ClassicAssignment(tuple(partitions)), version)


# ---------------------------------------------------------------------- upgrade


def validate_upgrade(core: ShardCore, classic: Group) -> None:
    """Kafka's ``validateOnlineUpgrade`` (raises :class:`UpgradeRefused`)."""
    gid = classic.group_id
    if not core.config.online_upgrade_enabled:
        raise UpgradeRefused(f"Cannot upgrade classic group {gid} to consumer group because "
                             "online upgrade is disabled.")
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise UpgradeRefused(f"Cannot upgrade classic group {gid} to consumer group because "
                             "the group does not use the consumer embedded protocol.")
    if len(classic.members) > core.config.consumer_max_size:
        raise UpgradeRefused(f"Cannot upgrade classic group {gid} to consumer group because "
                             "the group size exceeds the consumer group maximum size.")


def upgraded_members(core: ShardCore, classic: Group) -> list[ConsumerMember]:
    """The members a live classic group would have as a consumer group (Kafka's
    ``validateOnlineUpgrade`` then ``ConsumerGroup.fromClassicGroup``); nothing is written.
    Raises :class:`UpgradeRefused`."""
    validate_upgrade(core, classic)
    gid = classic.group_id
    malformed = UpgradeRefused(f"Cannot upgrade classic group {gid} to consumer group because "
                               "the embedded consumer protocol is malformed.")
    out: list[ConsumerMember] = []
    owners: set[tuple[uuid.UUID, int]] = set()
    for cm in classic.members.values():
        protocol = classic.protocol_name or cm.protocols[0][0]
        try:
            subscription = decode_subscription(cm.metadata(protocol))
            assignment = decode_assignment(cm.assignment)
        except (ConsumerProtocolError, KeyError) as exc:
            raise malformed from exc
        if assignment.user_data:
            raise UpgradeRefused(
                f"Cannot upgrade classic group {gid} to consumer group because an unsupported "
                "custom assignor is in use. Please refer to the documentation or switch to a "
                "default assignor before re-attempting the upgrade.")
        assigned = to_ids(assignment.partitions, core.topics)
        held = {(t, p) for t, ps in assigned.items() for p in ps}
        if held & owners:  # Kafka's partition epochs refuse a partition owned twice
            raise malformed
        owners |= held
        out.append(ConsumerMember(
            member_id=cm.member_id,
            instance_id=cm.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=cm.client_id,
            client_host=cm.client_host,
            subscribed_topic_names=tuple(subscription.topics),
            rebalance_timeout_ms=cm.rebalance_timeout_ms,
            member_epoch=classic.generation,
            previous_member_epoch=classic.generation,
            state=MemberState.STABLE,
            assigned=assigned,
            assignment_epochs=stamp_epochs((assigned,), {}, classic.generation),
            classic=ClassicMemberMetadata(cm.session_timeout_ms, tuple(cm.protocols)),
        ))
    return out


def convert_to_consumer(core: ShardCore, classic: Group) -> None:
    """Kafka's ``convertToConsumerGroup``: validate, then replace the classic group by a
    consumer group of the same members (records in Kafka's order)."""
    members = upgraded_members(core, classic)
    gid = classic.group_id
    for parked in classic.members.values():
        rb.answer_join(core, classic, parked,
                       JoinGroupResponse(E.rebalance_in_progress, parked.member_id))
        rb.answer_sync(core, parked, SyncGroupResponse(E.rebalance_in_progress))
    rb.remove_group(core, classic)
    core.write(*classic_records.group_tombstone(gid))
    epoch = classic.generation
    by_name = core.topics.by_name
    subscribed = {by_name[n].topic_id for m in members for n in m.subscribed_topic_names
                  if n in by_name}
    for m in members:
        core.write(*records.member_subscription(gid, m))
    core.write(*records.group_epoch(gid, epoch, core.topics.metadata_hash(subscribed)))
    for m in members:
        core.write(*records.target_member(gid, m.member_id, m.assigned))
    core.write(*records.target_epoch(gid, epoch, 0))
    for m in members:
        core.write(*records.current_assignment(gid, m))
    for m in members:
        assert m.classic is not None
        core.schedule(TimerKind.CONSUMER_SESSION, gid, m.member_id, m.classic.session_timeout_ms)


# ---------------------------------------------------------------------- downgrade


def _union(a: Assignment, b: Assignment) -> Assignment:
    return {t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in set(a) | set(b)}


def downgrades_without(core: ShardCore, group: ConsumerGroup, fenced: Iterable[str]) -> bool:
    """Kafka's ``validateOnlineDowngradeWithFencedMembers``."""
    leaving = set(fenced)
    remaining = len(group.members) - len(leaving & set(group.members))
    return (group.all_classic_except(leaving) and remaining > 0
            and core.config.online_downgrade_enabled and remaining <= core.config.max_size)


def downgrades_with_replaced_member(core: ShardCore, group: ConsumerGroup,
                                    replaced: ConsumerMember) -> bool:
    """Kafka's ``validateOnlineDowngradeWithReplacedMember``: a static member joining with
    the classic protocol replaced ``replaced`` (already swapped in ``group``), and now every
    member speaks the classic protocol."""
    return (replaced.classic is None and group.all_classic_except(())
            and core.config.online_downgrade_enabled
            and len(group.members) <= core.config.max_size)


def convert_to_classic(core: ShardCore, group: ConsumerGroup, fenced: Iterable[str],
                       rebalance: bool = True) -> Group:
    """Kafka's ``convertToClassicGroup``: the remaining (classic) members form a Stable
    classic group holding their target assignments, which rebalances at once when members
    left (``rebalance``), not when a static member joining with the classic protocol
    replaced the last consumer-protocol member."""
    leaving = set(fenced)
    gid = group.group_id
    topics = core.topics
    staying = [m for mid, m in group.members.items() if mid not in leaving]
    # Kafka writes each member's target assignment; samsa writes what the member holds
    # (assigned and still revoking), the same for a reconciled member. A member that had
    # not caught up would otherwise be recorded without partitions it still owns, and an
    # upgrade before the classic rebalance completes would hand them out a second time.
    held = {m.member_id: _union(m.assigned, m.pending_revocation) for m in staying}
    epoch = group.epoch
    core.cancel_group_timers(gid)
    for key in group.group_tombstone_keys():
        core.write(key, None)
    classic = Group(gid, state=GroupState.STABLE, state_timestamp=core.now_ms,
                    generation=epoch, protocol_type=CONSUMER_PROTOCOL_TYPE)
    for m in staying:
        assert m.classic is not None
        classic.add(Member(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.classic.session_timeout_ms,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=m.classic.supported_protocols,
        ))
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        member.assignment = encode_for(member.metadata(classic.protocol_name),
                                       held[member.member_id], topics)
    core.write(*classic_records.group_metadata(
        classic, {mid: m.assignment for mid, m in classic.members.items()}))
    core.groups[gid] = classic
    for member in classic.members.values():
        rb.schedule_heartbeat(core, classic, member)
    if rebalance:
        rb.prepare_rebalance(core, classic)
    return classic
