"""The classic rebalance: JoinGroup, the leader's assignment, SyncGroup, on the user's thread.

The rebalance step of :mod:`~samsa.client.group.classic_driver`'s ``poll``; the consumer
protocol's sibling is :mod:`~samsa.client.group.epoch_rebalance`.

:meth:`JoinLoop.ensure_active_group` asks the state machine for its next step and performs
the actions it returns, in order, until the member is stable or it would have to wait past
its deadline: look the coordinator up, commit and call listeners before a join, JoinGroup,
run the assignor (leader), SyncGroup, then apply the new assignment.

A JoinGroup or SyncGroup may be parked on the coordinator for up to the rebalance timeout
(a member that does not rejoin holds the whole group). When its answer has not come by the
deadline, or a ``wakeup()`` interrupts the wait, the request stays in flight and the next
call resumes waiting for the same answer (as long as the machine still
:meth:`~samsa.client.group.classic_machine.Membership.awaits` it), as Kafka's consumer does since
KIP-266: ``Consumer.poll`` passes a deadline of now, so it never waits for a rebalance and
a cooperative member goes on fetching the partitions it keeps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.assignors import (
    Assignment,
    Assignor,
    ClusterView,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from samsa.client.errors import WakeupError
from samsa.client.future import Future
from samsa.client.group.actions import (
    FindCoordinator,
    LosePartitions,
    RaiseError,
    RevokePartitions,
)
from samsa.client.group.classic_machine import (
    PROTOCOL_TYPE,
    Action,
    AssignPartitions,
    CommitOffsets,
    JoinedMember,
    Membership,
    PerformAssignment,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
)
from samsa.client.group.commits import OffsetCommitter
from samsa.client.group.context import MemberContext
from samsa.client.group.discovery import CoordinatorDiscovery
from samsa.client.group.listeners import ASSIGNED, PartitionChanges
from samsa.client.net import ApiKey

__all__ = ["JoinLoop"]

log = logging.getLogger(__name__)

GROUP_REQUEST_GRACE_MS = 5000
"""JoinGroup and SyncGroup may be parked for the rebalance timeout; they get this much more
(the JoinGroup at least the request timeout, as Kafka's ``JOIN_GROUP_TIMEOUT_LAPSE``)."""


class _NotAnswered(Exception):
    """The JoinGroup/SyncGroup answer did not come by the deadline (it stays in flight)."""


class JoinLoop:
    """(Re)joins the group with the member's subscription and assignors.

    ``on_answer`` runs (on the network thread) when a JoinGroup or SyncGroup answer comes:
    the consumer wakes its ``poll`` to go on with the rebalance. ``leave`` sends a
    LeaveGroup and waits for its answer.
    """

    def __init__(self, member: MemberContext[Membership], discovery: CoordinatorDiscovery,
                 committer: OffsetCommitter, changes: PartitionChanges,
                 assignors: Sequence[Assignor], rack: str | None, *,
                 on_answer: Callable[[], None], leave: Callable[[SendLeaveGroup], None]
                 ) -> None:
        self.member = member
        self.config = member.machine.config
        self.discovery = discovery
        self.committer = committer
        self.changes = changes
        self.assignors = list(assignors)
        self.rack = rack
        self.on_answer = on_answer
        self.leave = leave
        self._in_flight: dict[Action, Future[Any]] = {}
        self._resume: list[Action] = []
        """The request whose answer is awaited, then the rest of its batch of actions."""
        self.joined_snapshot: dict[str, int] = {}
        """Partition counts of the subscribed topics when the member last joined."""

    @property
    def awaiting_answer(self) -> bool:
        """True while a JoinGroup or SyncGroup sent by an earlier call is being resumed."""
        return bool(self._resume)

    def ensure_active_group(self, deadline: float) -> bool:
        """Run the join loop until the member is stable (True), or until going on would
        mean waiting past ``deadline`` (False): for a JoinGroup/SyncGroup answer (the
        request stays in flight; the next call resumes it), for the coordinator, or for
        a retry backoff. Actions that need no waiting (the commit and revocation before a
        join, sending it) run even when the deadline has passed."""
        m = self.member
        while True:
            m.check_wakeup()
            actions = self._take_resume()
            if not actions:
                with m.lock:
                    actions = m.machine.next_step(m.now_ms(), self._unsubscribed())
                    stable = not m.machine.needs_rejoin()
                if stable:
                    return True
            if not actions:
                now = m.clock.now()
                if now >= deadline:
                    return False
                m.clock.sleep(min(0.01, deadline - now))
                continue
            try:
                self._run(actions, deadline)
            except _NotAnswered:
                return False
            except WakeupError:
                if not self._resume:
                    with m.lock:
                        m.machine.abort_rebalance()
                raise
            except BaseException:
                with m.lock:
                    m.machine.abort_rebalance()
                raise
            if m.machine.coordinator is None and m.clock.now() >= deadline:
                return False  # still looking it up: the lookup stays in flight

    def _take_resume(self) -> list[Action]:
        """The interrupted batch, if the machine still awaits the answer it waits for."""
        actions, self._resume = self._resume, []
        if not actions:
            return []
        head = actions[0]
        with self.member.lock:
            wanted = isinstance(head, SendJoinGroup | SendSyncGroup) and \
                self.member.machine.awaits(head)
        if wanted:
            return actions
        self._in_flight.pop(head, None)  # its answer no longer matters
        return []

    def _unsubscribed(self) -> frozenset[TopicPartition]:
        """Owned partitions of topics the member no longer subscribes to."""
        subs = self.member.subs
        return frozenset(tp for tp in self.member.machine.owned if not subs.matches(tp.topic))

    def reset(self) -> None:
        """Forget a request being resumed (the member left the group)."""
        self._resume = []
        self._in_flight.clear()

    def _run(self, actions: list[Action], deadline: float) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            try:
                more = self._perform(action, deadline)
            except (WakeupError, _NotAnswered):
                if action in self._in_flight:  # a join/sync response is still coming
                    self._resume = [action, *queue]
                raise
            queue[:0] = more

    def _perform(self, action: Action, deadline: float) -> list[Action]:
        if isinstance(action, FindCoordinator):
            self.discovery.lookup(deadline)
            return []
        if isinstance(action, RaiseError):
            self.member.raise_fatal()
            return []
        if isinstance(action, CommitOffsets):
            self.committer.commit_before_revoke()
            return []
        if isinstance(action, RevokePartitions):
            self.changes.revoke(action.partitions)
            return []
        if isinstance(action, LosePartitions):
            self.changes.lose(action.partitions)
            return []
        if isinstance(action, AssignPartitions):
            self._assign(action)
            return []
        if isinstance(action, SendJoinGroup):
            return self._join(action, deadline)
        if isinstance(action, PerformAssignment):
            return self._perform_assignment(action)
        if isinstance(action, SendSyncGroup):
            return self._sync(action, deadline)
        if isinstance(action, SendLeaveGroup):
            self.leave(action)
            return []
        raise AssertionError(f"unexpected action in the join loop: {action!r}")

    # ---- JoinGroup ----------------------------------------------------------------------

    def _protocols(self) -> list[dict[str, Any]]:
        m = self.member
        topics = sorted(m.subs.topics)
        owned = list(m.subs.assignment) if self.config.cooperative else []
        generation = m.machine.generation
        return [{"name": a.name,
                 "metadata": encode_subscription(a.metadata(topics, owned=owned,
                                                            generation=generation,
                                                            rack=self.rack))}
                for a in self.assignors]

    def _join(self, action: SendJoinGroup, deadline: float) -> list[Action]:
        m = self.member
        body: dict[str, Any] = {}
        if action not in self._in_flight:  # a new request, not one being resumed
            if m.subs.type.name == "PATTERN":
                self._match_pattern()
            body = {
                "group_id": m.group_id,
                "session_timeout": self.config.session_timeout_ms,
                "rebalance_timeout": self.config.rebalance_timeout_ms,
                "member_id": action.member_id,
                "group_instance_id": m.config.group_instance_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": self._protocols(),
                "reason": action.reason,
            }
            self.joined_snapshot = self._snapshot()
        resp = self._send_group_request(action, ApiKey.JOIN_GROUP, body, deadline)
        now = m.now_ms()
        with m.lock:
            if resp is None:
                m.machine.coordinator_dead("JoinGroup failed", now)
                return m.machine.on_join_response(ErrorCode.network_exception, now)
            members = tuple(JoinedMember(j.member_id, j.group_instance_id, bytes(j.metadata))
                            for j in resp.members)
            return m.machine.on_join_response(
                int(resp.error_code), now, generation=int(resp.generation_id),
                member_id=resp.member_id, protocol=resp.protocol_name,
                leader_id=resp.leader, members=members,
                skip_assignment=bool(getattr(resp, "skip_assignment", False)),
                protocol_type=getattr(resp, "protocol_type", None))

    def _send_group_request(self, action: Action, api: ApiKey, body: dict[str, Any],
                            deadline: float) -> Any:
        """Send (or resume waiting for) the JoinGroup/SyncGroup of ``action``; its response,
        or None on a network failure. Raises :class:`_NotAnswered` at ``deadline`` (and
        WakeupError on ``wakeup()``) with the request still in flight."""
        m = self.member
        fut = self._in_flight.get(action)
        if fut is None:
            timeout_ms: float = self.config.rebalance_timeout_ms + GROUP_REQUEST_GRACE_MS
            if api == ApiKey.JOIN_GROUP:
                timeout_ms = max(timeout_ms, m.net.request_timeout * 1000)
            fut = self._in_flight[action] = m.net.send(m.coordinator_dest(), api, body,
                                                       timeout_ms=timeout_ms)
            fut.add_done_callback(lambda _: self.on_answer())
        while not m.clock.wait(fut, max(0.0, min(0.05, deadline - m.clock.now()))):
            m.check_wakeup()
            if m.clock.now() >= deadline:
                raise _NotAnswered
        del self._in_flight[action]
        if fut.failed():
            log.debug("group request failed: %s", fut.exception())
            return None
        return fut.value

    # ---- the leader's assignment ----------------------------------------------------------

    def _assignor(self, name: str) -> Assignor | None:
        return next((a for a in self.assignors if a.name == name), None)

    def _perform_assignment(self, action: PerformAssignment) -> list[Action]:
        m = self.member
        assignor = self._assignor(action.protocol)
        assert assignor is not None, "the machine accepts only the member's assignors"
        subscriptions = {j.member_id: decode_subscription(j.metadata, j.group_instance_id)
                         for j in action.members}
        all_topics = {t for s in subscriptions.values() for t in s.topics}
        cluster = m.metadata.refresh(all_topics | set(m.subs.topics))
        counts = {t: n for t in all_topics if (n := cluster.partition_count(t) or 0) > 0}
        # Replica racks matter only to rack-aware assignors, and only when members have racks.
        racked = any(s.rack_id for s in subscriptions.values())
        view = ClusterView(counts, {t: cluster.partition_racks(t) for t in counts} if racked
                           else {})
        result = assignor.assign(view, subscriptions)
        encoded = {member: encode_assignment(result.get(member, Assignment(())))
                   for member in subscriptions}
        with m.lock:
            return m.machine.on_assignment_computed(encoded)

    # ---- SyncGroup and the new assignment ---------------------------------------------------

    def _sync(self, action: SendSyncGroup, deadline: float) -> list[Action]:
        m = self.member
        body = {
            "group_id": m.group_id,
            "generation_id": action.generation,
            "member_id": action.member_id,
            "group_instance_id": m.config.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": action.protocol,
            "assignments": [{"member_id": mid, "assignment": a}
                            for mid, a in action.assignments],
        }
        resp = self._send_group_request(action, ApiKey.SYNC_GROUP, body, deadline)
        now = m.now_ms()
        with m.lock:
            if resp is None:
                m.machine.coordinator_dead("SyncGroup failed", now)
                return m.machine.on_sync_response(ErrorCode.network_exception, now,
                                                  action.generation)
            code = int(resp.error_code)
            partitions: frozenset[TopicPartition] = frozenset()
            assignment = None
            if code == ErrorCode.none:
                assignment = decode_assignment(bytes(resp.assignment or b""))
                partitions = frozenset(TopicPartition(*tp) for tp in assignment.partitions)
            actions = m.machine.on_sync_response(
                code, now, action.generation, partitions,
                protocol_type=getattr(resp, "protocol_type", None),
                protocol=getattr(resp, "protocol_name", None),
                subscribed=all(m.subs.matches(tp.topic) for tp in partitions))
            assignor = self._assignor(action.protocol)
            if assignor is not None and assignment is not None and \
                    any(isinstance(a, AssignPartitions) for a in actions):
                assignor.on_assignment(assignment, action.generation)
            return actions

    def _assign(self, action: AssignPartitions) -> None:
        self.changes.assign(action.assignment)
        self.committer.restart_auto_commit_timer()
        self.changes.call(ASSIGNED, action.added)

    # ---- metadata-driven rejoin -----------------------------------------------------------

    def _match_pattern(self) -> bool:
        m = self.member
        cluster = m.metadata.refresh(None)
        return m.subs.match_pattern(cluster.partitions, cluster.internal)

    def _snapshot(self) -> dict[str, int]:
        cluster = self.member.metadata.cluster
        return {t: cluster.partition_count(t) or 0 for t in self.member.subs.topics}

    def check_metadata(self) -> None:
        """After a metadata refresh: rejoin when topics or partition counts changed."""
        m = self.member
        if not m.subs.auto_assigned or m.machine.needs_rejoin():
            return
        changed = False
        if m.subs.type.name == "PATTERN":
            cluster = m.metadata.cluster
            changed = m.subs.match_pattern(cluster.partitions, cluster.internal)
        if changed or self._snapshot() != self.joined_snapshot:
            with m.lock:
                m.machine.request_rejoin("subscribed topics or partitions changed")
