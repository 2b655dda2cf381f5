"""A group in full (classic, consumer or share), for the console: members with their
epochs, current and target assignments (partitions pending revocation), and liveness
clocks read from the shard's
timer deadlines. Frozen copies, like :mod:`.queries`; nothing here changes the shard.

Liveness: the last heartbeat is the session deadline minus the session timeout (every
heartbeat pushes the deadline to now + timeout); the rebalance deadline is the timer that
ends the member's current wait (a consumer member's revocation, a classic member's join or
sync) or the group's (the join phase's rebalance timeout, the sync phase's).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from samsa.assignors import decode_assignment, decode_subscription
from samsa.coordinator.config import NEW_MEMBER_JOIN_TIMEOUT_MS
from samsa.coordinator.consumer.group import ConsumerGroup, MemberState
from samsa.coordinator.consumer.target import preferred_assignor
from samsa.coordinator.core import ShardCore
from samsa.coordinator.group import Group
from samsa.coordinator.queries import GroupSummary, consumer_summary, share_summary, summary
from samsa.coordinator.share.group import SHARE_ASSIGNOR, ShareGroup
from samsa.coordinator.timers import TimerKind

TopicPartitionName = tuple[str, int]


@dataclass(frozen=True)
class Liveness:
    """Clocks of one member, in ms relative to ``now`` (None: no such timer)."""

    since_heartbeat_ms: int | None
    session_expires_in_ms: int | None
    session_timeout_ms: int
    rebalance_deadline_in_ms: int | None
    #: what the rebalance deadline ends: "revocation", "join", "sync" (None: none)
    rebalance_deadline_kind: str | None


@dataclass(frozen=True)
class MemberDetail:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rack_id: str | None
    #: "classic" (JoinGroup/SyncGroup) or "consumer" (ConsumerGroupHeartbeat)
    protocol: str
    #: the classic protocols it offered, or its server assignor
    protocols: tuple[str, ...]
    subscribed_topics: tuple[str, ...]
    subscribed_regex: str | None
    #: consumer groups: its member epoch and state (stable, unrevoked, unreleased)
    member_epoch: int | None
    state: str | None
    assigned: tuple[TopicPartitionName, ...]
    target: tuple[TopicPartitionName, ...] | None
    pending_revocation: tuple[TopicPartitionName, ...]
    liveness: Liveness
    is_leader: bool = False


@dataclass(frozen=True)
class GroupDetail:
    summary: GroupSummary
    #: consumer groups: the target assignment's epoch (-1: none); classic: None
    assignment_epoch: int | None
    members: tuple[MemberDetail, ...]
    #: the group's own deadline (join phase, sync phase, initial delay), ms from now
    rebalance_deadline_in_ms: int | None
    rebalance_deadline_kind: str | None
    subscribed_topics: tuple[str, ...]


def group_detail(core: ShardCore, group_id: str, now_ms: int) -> GroupDetail | None:
    group = core.groups.get(group_id)
    if group is not None:
        return _classic(core, group, now_ms)
    consumer = core.hard.consumer.groups.get(group_id)
    if consumer is not None:
        return _consumer(core, consumer, now_ms)
    share = core.hard.share.groups.get(group_id)
    return None if share is None else _share(core, share, now_ms)


def _deadline(core: ShardCore, kind: TimerKind, group_id: str, member_id: str = "",
              now_ms: int = 0) -> int | None:
    at = core.deadlines.get(core.key(kind, group_id, member_id))
    return None if at is None else at - now_ms


def _liveness(core: ShardCore, gid: str, mid: str, now: int, session_kind: TimerKind,
              timeout_ms: int, waits: tuple[tuple[TimerKind, str], ...]) -> Liveness:
    expires = _deadline(core, session_kind, gid, mid, now)
    since = None if expires is None else max(timeout_ms - expires, 0)
    for kind, name in waits:
        left = _deadline(core, kind, gid, mid, now)
        if left is not None:
            return Liveness(since, expires, timeout_ms, left, name)
    return Liveness(since, expires, timeout_ms, None, None)


def _names(pairs: object) -> tuple[TopicPartitionName, ...]:
    return tuple(sorted((tp[0], tp[1]) for tp in pairs))  # type: ignore[attr-defined]


def _classic(core: ShardCore, group: Group, now: int) -> GroupDetail:
    gid = group.group_id
    members = []
    for m in group.members.values():
        assigned: tuple[TopicPartitionName, ...] = ()
        topics: tuple[str, ...] = ()
        if group.protocol_type == "consumer":
            try:
                if m.assignment:
                    assigned = _names(decode_assignment(m.assignment).partitions)
                if m.protocols:
                    topics = tuple(decode_subscription(m.protocols[0][1]).topics)
            except Exception:  # foreign or corrupt metadata: shown undecoded
                pass
        timeout = NEW_MEMBER_JOIN_TIMEOUT_MS if m.is_new else m.session_timeout_ms
        members.append(MemberDetail(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, None, "classic",
            tuple(m.protocol_names()), topics, None, None, None, assigned, None, (),
            _liveness(core, gid, m.member_id, now, TimerKind.SESSION, timeout, ()),
            is_leader=group.is_leader(m.member_id)))
    kind, left = None, None
    for timer, name in ((TimerKind.INITIAL_REBALANCE_DELAY, "initial delay"),
                        (TimerKind.REBALANCE_TIMEOUT, "join"), (TimerKind.PENDING_SYNC, "sync")):
        left = _deadline(core, timer, gid, "", now)
        if left is not None:
            kind = name
            break
    subscribed = tuple(sorted(group.subscribed_topics or ()))
    return GroupDetail(summary(core, group), None, tuple(members), left, kind, subscribed)


def _namer(core: ShardCore) -> Callable[[Mapping[uuid.UUID, Iterable[int]]],
                                         tuple[TopicPartitionName, ...]]:
    """Assignments by topic id -> sorted (topic name, partition) pairs."""
    names = {t.topic_id: t.name for t in core.topics.topics.values()}

    def named(assignment: Mapping[uuid.UUID, Iterable[int]]) -> tuple[TopicPartitionName, ...]:
        return tuple(sorted((names.get(t, str(t)), p) for t, ps in assignment.items()
                            for p in ps))

    return named


def _consumer(core: ShardCore, group: ConsumerGroup, now: int) -> GroupDetail:
    gid = group.group_id
    named = _namer(core)
    members = []
    session = core.config.consumer_session_timeout_for(gid)
    for m in group.members.values():
        timeout = m.classic.session_timeout_ms if m.classic is not None else session
        regex = m.subscribed_topic_regex
        topics = set(m.subscribed_topic_names)
        if regex and regex in group.regexes:
            topics |= group.regexes[regex].topics
        members.append(MemberDetail(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rack_id,
            "classic" if m.classic is not None else "consumer",
            tuple(p for p, _ in m.classic.supported_protocols) if m.classic is not None
            else (m.server_assignor or preferred_assignor(core, group),),
            tuple(sorted(topics)), regex, m.member_epoch, _member_state(m.state),
            named(m.assigned), named(group.target.get(m.member_id, {})),
            named(m.pending_revocation),
            _liveness(core, gid, m.member_id, now, TimerKind.CONSUMER_SESSION, timeout, (
                (TimerKind.CONSUMER_REBALANCE, "revocation"), (TimerKind.CONSUMER_JOIN, "join"),
                (TimerKind.CONSUMER_SYNC, "sync")))))
    return GroupDetail(consumer_summary(core, group), group.assignment_epoch, tuple(members),
                       None, None, tuple(sorted(group.subscribed_topic_names())))


def _share(core: ShardCore, group: ShareGroup, now: int) -> GroupDetail:
    """A KIP-932 share group: members with their epochs and assignments (a partition may
    be assigned to several members; there is no revocation), their session clocks."""
    gid = group.group_id
    named = _namer(core)
    session = core.config.share_session_timeout_for(gid)
    members = tuple(MemberDetail(
        m.member_id, None, m.client_id, m.client_host, m.rack_id, "share", (SHARE_ASSIGNOR,),
        tuple(sorted(m.subscribed_topic_names)), None, m.member_epoch, None,
        named(m.assigned), named(group.target.get(m.member_id, {})), (),
        _liveness(core, gid, m.member_id, now, TimerKind.SHARE_SESSION, session, ()))
        for m in group.members.values())
    topics = tuple(sorted({t for m in group.members.values() for t in m.subscribed_topic_names}))
    return GroupDetail(share_summary(core, group), group.assignment_epoch, members, None, None,
                       topics)


def _member_state(state: MemberState) -> str:
    return {MemberState.STABLE: "stable", MemberState.UNREVOKED_PARTITIONS: "unrevoked",
            MemberState.UNRELEASED_PARTITIONS: "unreleased"}.get(state, "unknown")


__all__ = ["GroupDetail", "Liveness", "MemberDetail", "group_detail"]
