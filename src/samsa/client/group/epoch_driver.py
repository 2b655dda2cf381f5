"""The driver of an epoch protocol's member (KIP-848 ``consumer``, KIP-932 ``share``).

A :class:`~samsa.client.group.driver.GroupDriver` running an
:class:`~samsa.client.group.epoch_machine.EpochMembership`; a protocol's driver
(:class:`~samsa.client.group.consumer_driver.ConsumerProtocolCoordinator`) names its
heartbeat API and request body, and what it commits with
(:class:`~samsa.client.group.share_driver.ShareGroupDriver` commits nothing). Here:

* the heartbeat thread sends the protocol's heartbeat whenever the machine says so (the
  interval comes from the coordinator; at once when joining or acknowledging), and the
  network thread applies the answers;
* the rebalance step of ``poll`` is the reconciliation
  (:mod:`~samsa.client.group.epoch_rebalance`: resolve topic ids, commit, revoke, assign);
* ``unsubscribe`` revokes (lost, if fenced) and leaves with a heartbeat at epoch -1
  (static members -2).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from samsa import TopicPartition
from samsa.client.future import Future
from samsa.client.group.actions import LosePartitions, RevokePartitions
from samsa.client.group.context import LEAVE_TIMEOUT_S, MemberContext
from samsa.client.group.driver import GroupDriver
from samsa.client.group.epoch_machine import EpochMembership, SendEpochHeartbeat
from samsa.client.group.epoch_rebalance import Reconciler
from samsa.client.net import ApiKey
from samsa.client.subscription import SubscriptionType

__all__ = ["EpochDriver"]

EM = TypeVar("EM", bound=EpochMembership[Any, Any])


def _millis(value: Any) -> int:
    if hasattr(value, "total_seconds"):
        return round(float(value.total_seconds()) * 1000)
    return int(value)


class EpochDriver(GroupDriver[EM]):
    """Membership, heartbeats and commits of an epoch protocol's member."""

    heartbeat_api: ClassVar[ApiKey]
    """The protocol's heartbeat API."""

    def __init__(self, member: MemberContext[EM], *, auto_commit: bool,
                 auto_commit_interval_ms: int,
                 on_assignment_changed: Callable[[set[TopicPartition]], None]) -> None:
        super().__init__(member, auto_commit=auto_commit,
                         auto_commit_interval_ms=auto_commit_interval_ms, cooperative=True,
                         on_assignment_changed=on_assignment_changed)
        self.reconciler = Reconciler(member, self.commits, self.changes, self.heartbeat.wake)

    @abstractmethod
    def _heartbeat_body(self, request: Any) -> dict[str, Any]:
        """The heartbeat API's request body of ``request``."""

    # ---- the user's poll ------------------------------------------------------------------

    def _polled(self) -> None:
        self.heartbeat.wake()

    def _needs_coordinator(self) -> bool:
        return self.member.machine.in_group()

    def _rebalance(self) -> bool:
        self.user_steps()
        return True

    def user_steps(self) -> None:
        """The user thread's part of the protocol: release lost partitions, raise a fatal
        error, reconcile a new assignment (``poll`` runs it)."""
        self.reconciler.run()

    def request_rejoin(self, reason: str) -> None:
        """The subscription changed: join with it, or send it with the next heartbeat."""
        m = self.member
        pattern = m.subs.pattern.pattern if m.subs.type == SubscriptionType.PATTERN and \
            m.subs.pattern is not None else None
        with m.lock:
            m.machine.subscribe(m.subs.topics, pattern)
        self.heartbeat.wake()

    # ---- heartbeats -------------------------------------------------------------------------

    def _heartbeat_action(self, action: object) -> None:
        if isinstance(action, SendEpochHeartbeat) and \
                self.member.machine.coordinator is not None:
            self._send_heartbeat(action.request, self.heartbeat.wake)

    def _send_heartbeat(self, req: Any, on_done: Callable[[], None] = lambda: None
                        ) -> Future[Any]:
        """Send ``req``; the network thread applies its answer to the machine."""
        m = self.member
        fut = m.net.send(m.coordinator_dest(), self.heartbeat_api, self._heartbeat_body(req))

        def done(f: Future[Any]) -> None:
            with m.lock:
                now = m.now_ms()
                if f.failed():
                    m.machine.on_heartbeat_failed(req, str(f.exception()), now)
                else:
                    r = f.value
                    assignment = None
                    if r.assignment is not None:
                        assignment = {t.topic_id: set(t.partitions)
                                      for t in r.assignment.topic_partitions}
                    m.machine.on_heartbeat_response(
                        req, now, int(r.error_code), message=r.error_message,
                        member_id=r.member_id, member_epoch=int(r.member_epoch),
                        heartbeat_interval_ms=_millis(r.heartbeat_interval),
                        assignment=assignment)
            on_done()

        fut.add_done_callback(done)
        return fut

    def _send_leave(self, req: Any) -> None:
        """Send a leave heartbeat from the user thread and wait (briefly) for it."""
        m = self.member
        if req is None or m.machine.coordinator is None:
            return
        m.clock.wait(self._send_heartbeat(req), LEAVE_TIMEOUT_S)

    # ---- leaving ----------------------------------------------------------------------------

    def unsubscribe(self) -> None:
        """Revoke (lost, if fenced) the partitions, then leave with epoch -1 (static: -2)."""
        m = self.member
        with m.lock:
            actions = m.machine.prepare_leave(frozenset(m.subs.assignment))
        try:
            for action in actions:
                if isinstance(action, RevokePartitions):
                    self.changes.revoke(action.partitions)
                elif isinstance(action, LosePartitions):
                    self.changes.lose(action.partitions)
        finally:
            with m.lock:
                request = m.machine.leave_request(m.now_ms())
            self._send_leave(request)
