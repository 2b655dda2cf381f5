"""The history's pure producer: it watches a shard's calls and writes history records.

Nothing in the handlers names it. :class:`~samsa.coordinator.core.ShardCore` calls four
hooks, all with the shard's injected clock (``core.now_ms``):

* :meth:`HistoryRecorder.begin` with the call's trigger (the request event, the timer key,
  a :class:`~.model.LoadInfo` for a load, :data:`UNLOAD`);
* :meth:`~HistoryRecorder.observe` for each record the call writes, before it is replayed
  (so the hard state still shows what it replaces);
* :meth:`~HistoryRecorder.transitioned` for each classic group state change;
* :meth:`~HistoryRecorder.flush` before the call's result is built: it writes the events
  the call opened or advanced, in the same result as the records that caused them.

A classic rebalance opens an event on PreparingRebalance (the cause comes from the
trigger: who joined, left or expired, and the client's KIP-800 reason), gets its
generation on CompletingRebalance and closes on Stable. A consumer group's event opens
when a group epoch record is written (the cause comes from the trigger and the records
written before it: a new member, a changed subscription, a regex that resolves to other
topics, else the topics' metadata), gets its target on the assignment epoch record and
closes when every member has reconciled. Each phase names the members it waited for last.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from samsa.coordinator.consumer.group import MemberState
from samsa.coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from samsa.coordinator.events import (
    NO_MEMBER_ID,
    ConsumerGroupHeartbeat,
    JoinGroup,
    LeaveGroup,
    OffsetCommit,
)
from samsa.coordinator.history import model as m
from samsa.coordinator.history.model import Cause, HistoryEvent, HistoryKey, LoadInfo, Outcome
from samsa.coordinator.records import GroupMetadataKey, OffsetCommitKey
from samsa.coordinator.state import GroupState
from samsa.coordinator.timers import TimerKey, TimerKind

if TYPE_CHECKING:
    from samsa.coordinator.consumer.group import ConsumerGroup
    from samsa.coordinator.core import ShardCore
    from samsa.coordinator.group import Group

S = GroupState

#: the trigger of ``unload``: nothing may be written then
UNLOAD = object()
#: most member ids one event names
MAX_NAMED = 16
CLASSIC, CONSUMER = "classic", "consumer"


@dataclass
class _Facts:
    """What one call wrote for one group (consumer records seen, classic tombstones)."""

    joined: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    instances: dict[str, str] = field(default_factory=dict)
    regex: bool = False
    classic_tombstone: bool = False
    consumer_tombstone: bool = False
    group_record: bool = False
    bumped: bool = False
    reset: list[tuple[str, int]] = field(default_factory=list)
    consumer: bool = False


class HistoryRecorder:
    """One shard's history producer (soft state: the in-progress facts of a call, the
    last members to arrive in each group's current phase)."""

    def __init__(self, core: ShardCore) -> None:
        self.core = core
        self.limit = core.config.history_max_events
        self.trigger: object = None
        self.active = False
        self._facts: dict[str, _Facts] = {}
        self._pending: dict[str, dict[int, HistoryEvent]] = {}
        self._arrivals: dict[str, deque[str]] = {}
        #: consumer groups: members that had partitions to revoke in the current rebalance
        self._revoking: dict[str, dict[str, None]] = {}
        #: consumer groups: (event seq, assignment epoch, member ids, how many of them are
        #: known reconciled): a rebalance's members are scanned once, not once per call
        self._scans: dict[str, tuple[int, int, list[str], int]] = {}
        self._join_pre = ""
        self._waited: tuple[str, ...] = ()
        self._admin_commit = False

    # ------------------------------------------------------------------ hooks

    def begin(self, trigger: object) -> None:
        self.trigger = trigger
        self.active = self.limit > 0 and trigger is not UNLOAD
        if not self.active:
            return
        self._facts = {}
        self._pending = {}
        self._join_pre = ""
        self._waited = ()
        kind = type(trigger)
        self._admin_commit = (kind is OffsetCommit and trigger.generation_id < 0  # type: ignore[attr-defined]
                              and trigger.member_id == NO_MEMBER_ID)  # type: ignore[attr-defined]
        if kind is JoinGroup:
            self._join_pre = self._join_kind(trigger)  # type: ignore[arg-type]
        elif kind is TimerKey:
            self._waited = self._timer_waited(trigger)  # type: ignore[arg-type]

    def observe(self, key: object, value: object) -> None:
        """A record is about to be replayed into hard state."""
        if not self.active:
            return
        kind = type(key)
        if kind is OffsetCommitKey:
            if self._admin_commit and value is not None:
                assert isinstance(key, OffsetCommitKey)
                self._facts_of(key.group).reset.append((key.topic, key.partition))
            return
        if kind is HistoryKey:
            return
        if kind is GroupMetadataKey:
            assert isinstance(key, GroupMetadataKey)
            facts = self._facts_of(key.group)
            if value is None:
                facts.classic_tombstone = True
            else:
                facts.group_record = True
            return
        self._observe_consumer(key, value)

    def transitioned(self, group: Group, before: GroupState) -> None:
        """A classic group went from ``before`` to ``group.state``."""
        if not self.active:
            return
        gid, after, now = group.group_id, group.state, self.core.now_ms
        event = self._open(gid)
        if after is S.PREPARING_REBALANCE:
            if event is not None:
                self._close(gid, event, Outcome.SUPERSEDED, m.SUPERSEDED)
            cause, member, reason, named = self._classic_cause(group)
            self._arrivals[gid] = deque(maxlen=3)
            self._new(gid, HistoryEvent(
                seq=0, group_type=CLASSIC, cause=cause, at_ms=now, member_id=member,
                reason=reason, members=named, epoch_before=group.generation,
                phases=(m.Phase(m.PREPARING, now),), member_count=len(group.members)))
        elif before is S.PREPARING_REBALANCE and after in (S.COMPLETING_REBALANCE, S.EMPTY):
            if event is None:
                event = self._new(gid, HistoryEvent(
                    0, CLASSIC, Cause.UNKNOWN, now, epoch_before=group.generation - 1,
                    phases=(m.Phase(m.PREPARING, now),)))
            held, note = self._join_held_by(group)
            empty = after is S.EMPTY
            self._put(gid, replace(
                event, epoch_after=group.generation, member_count=len(group.members),
                phases=(*event.phases, m.Phase(m.EMPTY if empty else m.COMPLETING, now, held,
                                                note)),
                outcome=Outcome.EMPTY if empty else Outcome.IN_PROGRESS))
        elif after is S.STABLE and before is S.COMPLETING_REBALANCE and event is not None:
            leader = (group.leader_id,) if group.leader_id else ()
            self._put(gid, replace(
                event, outcome=Outcome.STABLE, member_count=len(group.members),
                phases=(*event.phases, m.Phase(m.STABLE, now, leader, "the leader's SyncGroup"))))
        elif after is S.DEAD and event is not None:
            self._close(gid, event, Outcome.ENDED, m.ENDED)

    def flush(self) -> None:
        """Write what this call opened or advanced (called once per call, at its end)."""
        if not self.active:
            return
        trigger = self.trigger
        if type(trigger) is JoinGroup:
            self._note_join_arrival(trigger)
        for gid, facts in self._facts.items():
            self._settle(gid, facts)
        for gid, events in self._pending.items():
            for seq, event in sorted(events.items()):
                self.core.write(HistoryKey(gid, seq % self.limit), event)
        self._pending = {}
        self._facts = {}
        self.trigger = None

    def loaded(self, info: LoadInfo) -> None:
        """The shard was just loaded: note it in every live group's history, and close
        classic rebalances that were in flight (a classic group loads Stable or Empty)."""
        if not self.active:
            return
        core, now = self.core, self.core.now_ms
        histories = core.hard.history.groups
        for gid, slots in list(histories.items()):
            for slot in [s for s in slots if s >= self.limit]:
                core.write(HistoryKey(gid, slot), None)
        detail = [("load_ms", str(max(now - info.started_ms, 0)))]
        if info.node_id is not None:
            detail.append(("node", str(info.node_id)))
        if info.previous_node is not None:
            detail.append(("previous_node", str(info.previous_node)))
        if info.lease_epoch is not None:
            detail.append(("lease_epoch", str(info.lease_epoch)))
        detail.append(("partition", str(core.partition)))
        moved = info.previous_node is not None and info.previous_node != info.node_id
        reason = ("fail-over: shard taken over from node "
                  f"{info.previous_node}" if moved else "shard loaded from its log")
        for gid, group in core.groups.items():
            if group.members or gid in histories:
                event = self._open(gid)
                if event is not None and event.group_type == CLASSIC:
                    self._close(gid, event, Outcome.INTERRUPTED, m.INTERRUPTED)
                self._noted(gid, CLASSIC, Cause.COORDINATOR_LOADED, reason, group.generation,
                            len(group.members), tuple(detail))
        for gid, consumer in core.hard.consumer.groups.items():
            self._noted(gid, CONSUMER, Cause.COORDINATOR_LOADED, reason, consumer.epoch,
                        len(consumer.members), tuple(detail))

    # ------------------------------------------------------------------ events

    def _open(self, gid: str) -> HistoryEvent | None:
        """The group's newest rebalance (events that bump nothing aside) if it is in
        progress."""
        latest: HistoryEvent | None = None
        for events in (self.core.hard.history.groups.get(gid, {}), self._pending.get(gid, {})):
            for event in events.values():
                if event.outcome is not Outcome.NOTED and (latest is None
                                                           or event.seq >= latest.seq):
                    latest = event
        return latest if latest is not None and latest.outcome is Outcome.IN_PROGRESS else None

    def _next_seq(self, gid: str) -> int:
        pending = self._pending.get(gid)
        stored = self.core.hard.history.latest(gid)
        return max([e.seq for e in (pending or {}).values()]
                   + [stored.seq if stored is not None else 0]) + 1

    def _new(self, gid: str, event: HistoryEvent) -> HistoryEvent:
        event = replace(event, seq=self._next_seq(gid))
        self._put(gid, event)
        return event

    def _put(self, gid: str, event: HistoryEvent) -> None:
        self._pending.setdefault(gid, {})[event.seq] = event

    def _close(self, gid: str, event: HistoryEvent, outcome: Outcome, phase: str,
               held: tuple[str, ...] = (), note: str = "") -> None:
        self._put(gid, replace(event, outcome=outcome, phases=(
            *event.phases, m.Phase(phase, self.core.now_ms, held, note))))

    def _noted(self, gid: str, group_type: str, cause: Cause, reason: str | None, epoch: int,
               members: int, detail: tuple[tuple[str, str], ...] = (),
               member_id: str | None = None) -> None:
        self._new(gid, HistoryEvent(
            0, group_type, cause, self.core.now_ms, member_id, reason, (), epoch, epoch, (),
            Outcome.NOTED, members, detail))

    # ------------------------------------------------------------------ classic causes

    def _join_kind(self, ev: JoinGroup) -> str:
        group = self.core.groups.get(ev.group_id)
        if group is None:
            return "new"
        if ev.member_id == NO_MEMBER_ID:
            return "static" if group.has_static(ev.group_instance_id) else "new"
        if ev.member_id in group.pending_members:
            return "pending"
        return "known" if ev.member_id in group.members else "new"

    def _timer_waited(self, key: TimerKey) -> tuple[str, ...]:
        group = self.core.groups.get(key.group_id)
        if group is None:
            return ()
        if key.kind is TimerKind.REBALANCE_TIMEOUT:
            return tuple(x.member_id for x in group.not_yet_rejoined()
                         if not x.is_static)[:MAX_NAMED]
        if key.kind is TimerKind.PENDING_SYNC:
            return tuple(group.pending_sync)[:MAX_NAMED]
        return ()

    def _joiner(self, ev: JoinGroup, group: Group) -> str | None:
        """The member a JoinGroup added or rejoined (a new id is the newest member)."""
        if ev.member_id and ev.member_id in group.members:
            return ev.member_id
        if self._join_pre in ("new", "static") and group.members:
            return next(reversed(group.members))
        return None

    def _classic_cause(self, group: Group) -> tuple[Cause, str | None, str | None,
                                                    tuple[str, ...]]:
        trigger, facts = self.trigger, self._facts.get(group.group_id)
        if facts is not None and facts.consumer_tombstone:
            return Cause.PROTOCOL_DOWNGRADE, _member_of(trigger), None, ()
        if isinstance(trigger, JoinGroup):
            joiner = self._joiner(trigger, group)
            cause = {"static": Cause.STATIC_MEMBER_REPLACED,
                     "known": Cause.MEMBER_REJOINED}.get(self._join_pre, Cause.MEMBER_JOINED)
            return cause, joiner, trigger.reason, ()
        if isinstance(trigger, LeaveGroup):
            return _leave_cause(trigger)
        if isinstance(trigger, TimerKey):
            if trigger.kind is TimerKind.SESSION:
                return Cause.SESSION_EXPIRED, trigger.member_id, None, ()
            if trigger.kind is TimerKind.PENDING_SYNC:
                return Cause.SYNC_TIMEOUT, None, "members never sent SyncGroup", self._waited
        if isinstance(trigger, LoadInfo):
            return (Cause.GROUP_TOO_LARGE, None,
                    f"loaded with {len(group.members)} members, over group.max.size", ())
        return Cause.UNKNOWN, _member_of(trigger), None, ()

    def _join_held_by(self, group: Group) -> tuple[tuple[str, ...], str]:
        trigger = self.trigger
        arrived = tuple(reversed(self._arrivals.get(group.group_id, ())))
        if isinstance(trigger, JoinGroup):
            joiner = self._joiner(trigger, group)
            last = (joiner,) if joiner else ()
            return tuple(dict.fromkeys(last + arrived))[:3], "the last JoinGroup"
        if isinstance(trigger, TimerKey):
            if trigger.kind is TimerKind.REBALANCE_TIMEOUT:
                return self._waited, "rebalance timeout: members that did not rejoin removed"
            if trigger.kind is TimerKind.INITIAL_REBALANCE_DELAY:
                return arrived, "group.initial.rebalance.delay.ms"
            if trigger.kind in (TimerKind.SESSION, TimerKind.PENDING_MEMBER):
                return (trigger.member_id,), "session expired while the others waited"
        if isinstance(trigger, LeaveGroup):
            return tuple(x.member_id for x in trigger.members)[:MAX_NAMED], "left"
        return arrived, ""

    def _note_join_arrival(self, ev: JoinGroup) -> None:
        group = self.core.groups.get(ev.group_id)
        if group is not None and group.is_(S.PREPARING_REBALANCE):
            joiner = self._joiner(ev, group)
            if joiner is not None:
                self._arrivals.setdefault(ev.group_id, deque(maxlen=3)).append(joiner)

    # ------------------------------------------------------------------ consumer groups

    def _facts_of(self, gid: str) -> _Facts:
        facts = self._facts.get(gid)
        if facts is None:
            facts = self._facts[gid] = _Facts()
        return facts

    def _observe_consumer(self, key: object, value: object) -> None:
        gid = getattr(key, "group", None)
        if gid is None:
            return
        group = self.core.hard.consumer.groups.get(gid)
        facts = self._facts_of(gid)
        facts.consumer = True
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                facts.consumer_tombstone = True
                return
            assert isinstance(value, ConsumerGroupMetadataValue)
            before = 0 if group is None else group.epoch
            if value.epoch > before:
                facts.bumped = True
                self._consumer_bump(gid, before, value.epoch, facts)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            old = None if group is None else group.members.get(key.member_id)
            if value is None:
                facts.removed.append(key.member_id)
                if old is not None and old.instance_id is not None:
                    facts.instances[key.member_id] = old.instance_id
                return
            assert isinstance(value, ConsumerGroupMemberMetadataValue)
            if value.instance_id is not None:
                facts.instances[key.member_id] = value.instance_id
            if old is None:
                facts.joined.append(key.member_id)
            elif (old.subscribed_topic_names, old.subscribed_topic_regex) != (
                    value.subscribed_topic_names, value.subscribed_topic_regex):
                facts.changed.append(key.member_id)
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            resolved = None if group is None else group.regexes.get(key.regex)
            old_topics = frozenset() if resolved is None else resolved.topics
            new_topics = (frozenset() if not isinstance(value, ConsumerGroupRegularExpressionValue)
                          else frozenset(value.topics))
            facts.regex |= old_topics != new_topics
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                event = self._open(gid)
                if event is not None and 0 <= event.epoch_after <= value.assignment_epoch \
                        and not any(p.name == m.TARGET_COMPUTED for p in event.phases):
                    self._put(gid, replace(event, phases=(
                        *event.phases, m.Phase(m.TARGET_COMPUTED, self.core.now_ms))))
        elif (isinstance(key, ConsumerGroupCurrentMemberAssignmentKey)
              and isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
              and group is not None):
            if value.state == MemberState.UNREVOKED_PARTITIONS:
                self._revoking.setdefault(gid, {})[key.member_id] = None
            elif value.state == MemberState.STABLE \
                    and value.member_epoch == group.assignment_epoch:
                self._arrivals.setdefault(gid, deque(maxlen=3)).append(key.member_id)

    def _consumer_bump(self, gid: str, before: int, after: int, facts: _Facts) -> None:
        event = self._open(gid)
        if event is not None:
            self._close(gid, event, Outcome.SUPERSEDED, m.SUPERSEDED, note=f"by epoch {after}")
        cause, member, reason, named = self._consumer_cause(facts)
        group = self.core.hard.consumer.groups.get(gid)
        self._arrivals[gid] = deque(maxlen=3)
        self._revoking.pop(gid, None)
        self._new(gid, HistoryEvent(
            0, CONSUMER, cause, self.core.now_ms, member, reason, named, before, after,
            (m.Phase(m.ASSIGNING, self.core.now_ms),),
            member_count=0 if group is None else len(group.members)))

    def _consumer_cause(self, facts: _Facts) -> tuple[Cause, str | None, str | None,
                                                      tuple[str, ...]]:
        trigger = self.trigger
        if isinstance(trigger, TimerKey):
            cause = {TimerKind.CONSUMER_SESSION: Cause.SESSION_EXPIRED,
                     TimerKind.CONSUMER_REBALANCE: Cause.REBALANCE_TIMEOUT,
                     TimerKind.CONSUMER_JOIN: Cause.REBALANCE_TIMEOUT,
                     TimerKind.CONSUMER_SYNC: Cause.SYNC_TIMEOUT}.get(trigger.kind)
            if cause is not None:
                return cause, trigger.member_id, None, ()
        if facts.classic_tombstone:
            return Cause.PROTOCOL_UPGRADE, _member_of(trigger), None, ()
        if isinstance(trigger, LeaveGroup):
            return _leave_cause(trigger)
        if isinstance(trigger, ConsumerGroupHeartbeat) and trigger.member_epoch == -1:
            return Cause.MEMBER_LEFT, trigger.member_id, None, ()
        reason = trigger.reason if isinstance(trigger, JoinGroup) else None
        if facts.joined:
            return Cause.MEMBER_JOINED, facts.joined[0], reason, ()
        if facts.changed:
            return Cause.SUBSCRIPTION_CHANGED, facts.changed[0], reason, ()
        if facts.removed:
            return Cause.MEMBER_LEFT, facts.removed[0], reason, tuple(facts.removed[1:])
        if facts.regex:
            return Cause.REGEX_CHANGED, None, "a subscribed regex resolves to other topics", ()
        if isinstance(trigger, JoinGroup):
            return Cause.MEMBER_REJOINED, trigger.member_id or None, reason, ()
        return (Cause.TOPICS_CHANGED, None,
                "partitions or topics the group subscribes to were added or deleted", ())

    # ------------------------------------------------------------------ end of a call

    def _settle(self, gid: str, facts: _Facts) -> None:
        core = self.core
        consumer = core.hard.consumer.groups.get(gid)
        classic = core.groups.get(gid)
        if facts.reset and (consumer is not None or (
                classic is not None and (classic.generation > 0 or classic.protocol_type))):
            topics = sorted({t for t, _ in facts.reset})
            self._noted(gid, CONSUMER if consumer is not None else CLASSIC,
                        Cause.OFFSETS_RESET, "offsets committed by an admin on the empty group",
                        consumer.epoch if consumer is not None else classic.generation,  # type: ignore[union-attr]
                        0, (("partitions", str(len(facts.reset))),
                            ("topics", ",".join(topics))))
        self._static_replaced(gid, facts, classic)
        if facts.consumer:
            event = self._open(gid)
            if event is not None and event.group_type == CONSUMER:
                if consumer is None:
                    self._close(gid, event, Outcome.ENDED, m.ENDED)
                elif not consumer.members:
                    self._close(gid, event, Outcome.EMPTY, m.EMPTY)
                elif consumer.assignment_epoch >= event.epoch_after and self._reconciled(
                        gid, event.seq, consumer):
                    held = tuple(reversed(self._arrivals.get(gid, ())))
                    revoked = list(self._revoking.pop(gid, {}))[:MAX_NAMED]
                    note = "the last members to reconcile" + (
                        f"; waited for {', '.join(revoked)} to revoke partitions"
                        if revoked else "")
                    self._put(gid, replace(event, member_count=len(
                        consumer.members), outcome=Outcome.STABLE, phases=(
                        *event.phases, m.Phase(m.RECONCILED, core.now_ms, held, note))))
        gone = classic is None and consumer is None and gid not in core.hard.offsets
        if gone and (facts.classic_tombstone or facts.consumer_tombstone):
            self._pending.pop(gid, None)
            for soft in (self._arrivals, self._revoking, self._scans):
                soft.pop(gid, None)
            for slot in list(core.hard.history.groups.get(gid, {})):
                core.write(HistoryKey(gid, slot), None)

    def _reconciled(self, gid: str, seq: int, consumer: ConsumerGroup) -> bool:
        """Whether every member is at the target. A member reconciled to an assignment
        epoch stays so until the next epoch (a new event), so the scan resumes where it
        stopped; members that join bump the epoch, which starts a new scan."""
        epoch, members = consumer.assignment_epoch, consumer.members
        scan = self._scans.get(gid)
        if scan is None or scan[0] != seq or scan[1] != epoch:
            scan = (seq, epoch, list(members), 0)
        order, done = scan[2], scan[3]
        while done < len(order):
            member = members.get(order[done])
            if member is not None and not member.is_reconciled_to(epoch):
                break
            done += 1
        if done < len(order):
            self._scans[gid] = (seq, epoch, order, done)
            return False
        self._scans.pop(gid, None)
        if len(members) <= len(order):
            return True
        known = set(order)
        return all(x.is_reconciled_to(epoch) for mid, x in members.items() if mid not in known)

    def _static_replaced(self, gid: str, facts: _Facts, classic: Group | None) -> None:
        """A static member rejoined under a new id without a rebalance."""
        trigger = self.trigger
        if facts.bumped or (gid in self._pending and any(
                e.outcome is not Outcome.NOTED for e in self._pending[gid].values())):
            return
        if isinstance(trigger, JoinGroup) and self._join_pre == "static" and facts.group_record \
                and classic is not None:
            self._noted(gid, CLASSIC, Cause.STATIC_MEMBER_REPLACED, trigger.reason,
                        classic.generation, len(classic.members),
                        (("instance_id", trigger.group_instance_id or ""),),
                        member_id=self._joiner(trigger, classic))
            return
        replaced = [mid for mid in facts.joined if facts.instances.get(mid) is not None
                    and facts.instances[mid] in {facts.instances.get(r) for r in facts.removed}]
        consumer = self.core.hard.consumer.groups.get(gid)
        if replaced and consumer is not None:
            self._noted(gid, CONSUMER, Cause.STATIC_MEMBER_REPLACED, None, consumer.epoch,
                        len(consumer.members), (("instance_id", facts.instances[replaced[0]]),),
                        member_id=replaced[0])


def _member_of(trigger: object) -> str | None:
    member = getattr(trigger, "member_id", None)
    return member if isinstance(member, str) and member else None


def _leave_cause(ev: LeaveGroup) -> tuple[Cause, str | None, str | None, tuple[str, ...]]:
    first = ev.members[0] if ev.members else None
    reason = None if first is None else first.reason
    text = (reason or "").lower()
    if first is not None and (first.member_id == NO_MEMBER_ID or "admin" in text):
        cause = Cause.ADMIN_REMOVAL
    elif "poll" in text:
        cause = Cause.MAX_POLL_EXCEEDED
    else:
        cause = Cause.MEMBER_LEFT
    member = None if first is None else (first.member_id or first.group_instance_id)
    others = tuple(x.member_id or x.group_instance_id or "" for x in ev.members[1:])
    return cause, member, reason, others[:MAX_NAMED]
