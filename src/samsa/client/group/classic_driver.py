"""The driver of a classic group member (JoinGroup/SyncGroup/Heartbeat): ``Consumer()``.

A :class:`~samsa.client.group.driver.GroupDriver` running
:class:`~samsa.client.group.classic_machine.Membership`; the consumer protocol's sibling is
:mod:`~samsa.client.group.consumer_driver`. What is classic here: the rebalance step of
``poll`` is the join loop (:mod:`~samsa.client.group.classic_rebalance`: JoinGroup, the
leader's assignment, SyncGroup, metadata-driven rejoins), the heartbeat thread sends
Heartbeat (and LeaveGroup when the poll timer expires), and the member leaves with
LeaveGroup. ``poll`` never waits for a rebalance: a JoinGroup or SyncGroup parked on the
coordinator stays in flight and the next poll goes on with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from samsa import TopicPartition
from samsa.assignors import Assignor
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.future import Future
from samsa.client.group.classic_machine import (
    Membership,
    MembershipConfig,
    SendHeartbeat,
    SendLeaveGroup,
)
from samsa.client.group.classic_rebalance import JoinLoop
from samsa.client.group.context import LEAVE_TIMEOUT_S, MemberContext
from samsa.client.group.driver import GroupDriver
from samsa.client.group.listeners import REVOKED
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey
from samsa.client.subscription import SubscriptionState

__all__ = ["ConsumerCoordinator"]


class ConsumerCoordinator(GroupDriver[Membership]):
    """Group membership, heartbeats and offset commits of a classic group member."""

    def __init__(self, metadata: Metadata, subs: SubscriptionState, config: MembershipConfig,
                 assignors: Sequence[Assignor], *, client_id: str, auto_commit: bool,
                 auto_commit_interval_ms: int, rack: str | None,
                 wakeup_flag: Callable[[], bool],
                 on_assignment_changed: Callable[[set[TopicPartition]], None] = lambda _: None,
                 on_group_answer: Callable[[], None] = lambda: None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        """``on_group_answer`` runs on the network thread when a JoinGroup or SyncGroup
        answer arrives (the consumer wakes its poll)."""
        if not config.assignors:  # the coordinator must choose one of these
            config = dataclasses.replace(config, assignors=tuple(a.name for a in assignors))
        member = MemberContext(Membership(config, auto_commit=auto_commit), metadata, subs,
                               client_id=client_id, clock=clock, wakeup_flag=wakeup_flag)
        super().__init__(member, auto_commit=auto_commit,
                         auto_commit_interval_ms=auto_commit_interval_ms,
                         cooperative=config.cooperative,
                         on_assignment_changed=on_assignment_changed)
        self.join_loop = JoinLoop(member, self.discovery, self.commits, self.changes,
                                  assignors, rack, on_answer=on_group_answer,
                                  leave=self._send_leave)

    # ---- the user's poll ------------------------------------------------------------------

    def _polled(self) -> None:
        self.member.raise_fatal()

    def _rebalance(self) -> bool:
        m = self.member
        return not m.machine.needs_rejoin() or self.join_loop.ensure_active_group(
            m.clock.now())

    def request_rejoin(self, reason: str) -> None:
        """Join again on the next poll (the subscription changed)."""
        with self.member.lock:
            self.member.machine.request_rejoin(reason)

    def check_metadata(self) -> None:
        """After a metadata refresh: rejoin when topics or partition counts changed."""
        self.join_loop.check_metadata()

    # ---- the heartbeat thread's requests --------------------------------------------------

    def _heartbeat_action(self, action: object) -> None:
        if isinstance(action, SendHeartbeat):
            self._send_heartbeat(action)
        elif isinstance(action, SendLeaveGroup):
            self._send_leave(action, wait=False)

    def _send_heartbeat(self, action: SendHeartbeat) -> None:
        """Send a Heartbeat; its answer is applied by the network thread.

        Its timeout is the request timeout, bounded by the session timeout: a heartbeat
        left unanswered closes the connection, and the member finds the coordinator again
        while its session lasts.
        """
        m = self.member
        config = m.machine.config
        body = {"group_id": m.group_id, "generation_id": action.generation,
                "member_id": action.member_id,
                "group_instance_id": config.group_instance_id}
        timeout_ms = min(m.net.request_timeout * 1000, config.session_timeout_ms)
        fut = m.net.send(m.coordinator_dest(), ApiKey.HEARTBEAT, body, timeout_ms=timeout_ms)

        def done(f: Future[Any]) -> None:
            with m.lock:
                now = m.now_ms()
                if f.failed():
                    m.machine.on_heartbeat_failed(str(f.exception()), now)
                else:
                    m.machine.on_heartbeat_response(int(f.value.error_code), now,
                                                    action.generation)

        fut.add_done_callback(done)

    def _send_leave(self, action: SendLeaveGroup, wait: bool = True) -> None:
        """Send LeaveGroup; ``wait``: block (up to :data:`LEAVE_TIMEOUT_S`) for the answer.

        The heartbeat thread does not wait: a coordinator slow to answer must not stop it.
        """
        m = self.member
        if m.machine.coordinator is None:
            return
        body = {"group_id": m.group_id, "member_id": action.member_id,
                "members": [{"member_id": action.member_id,
                             "group_instance_id": m.config.group_instance_id,
                             "reason": action.reason}]}
        fut = m.net.send(m.coordinator_dest(), ApiKey.LEAVE_GROUP, body,
                         timeout_ms=LEAVE_TIMEOUT_S * 1000)
        if wait:
            m.clock.wait(fut, LEAVE_TIMEOUT_S)

    # ---- leaving ----------------------------------------------------------------------------

    def unsubscribe(self) -> None:
        """Leave the group (revoking partitions first) and stop heartbeating."""
        m = self.member
        owned = frozenset(m.subs.assignment)
        if owned and m.subs.auto_assigned and m.machine.generation >= 0:
            self.changes.call(REVOKED, owned)
        with m.lock:
            actions = m.machine.leave("the consumer unsubscribed")
        self.join_loop.reset()
        for action in actions:
            if isinstance(action, SendLeaveGroup):
                self._send_leave(action, wait=True)
