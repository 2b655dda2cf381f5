"""The consumer's group driver: runs :class:`~samsa.client.membership.Membership` over the
network, from the user's thread and a heartbeat thread.

It is put together from small parts that share one
:class:`~samsa.client.member.MemberContext` (the machine behind its lock, the clock, the
network):

* :mod:`~samsa.client.discovery`: FindCoordinator;
* :mod:`~samsa.client.rebalance`: the join loop (JoinGroup, assignment, SyncGroup);
* :mod:`~samsa.client.listeners`: partition changes and the user's rebalance listener;
* :mod:`~samsa.client.heartbeat`: the heartbeat thread;
* :mod:`~samsa.client.commits`: OffsetCommit, OffsetFetch and auto-commit.

``Consumer.poll`` calls :meth:`ConsumerCoordinator.poll` (find the coordinator, join, run
listener callbacks, auto-commit); it never waits for a rebalance: a JoinGroup or SyncGroup
parked on the coordinator stays in flight and the next poll goes on with it. Every part
takes the lock only around the state machine, never while waiting on the network or
running user callbacks.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from samsa import TopicPartition
from samsa.assignors import Assignor
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.commits import OffsetAndMetadata, OffsetCommitter
from samsa.client.discovery import CoordinatorDiscovery
from samsa.client.errors import KafkaError
from samsa.client.future import Future
from samsa.client.heartbeat import HeartbeatThread
from samsa.client.listeners import REVOKED, PartitionChanges
from samsa.client.member import MemberContext, MemberStatus
from samsa.client.membership import MembershipConfig, SendLeaveGroup
from samsa.client.metadata import Metadata
from samsa.client.rebalance import JoinLoop
from samsa.client.subscription import SubscriptionState

__all__ = ["ConsumerCoordinator", "MemberStatus", "OffsetAndMetadata"]

log = logging.getLogger(__name__)


class ConsumerCoordinator:
    """Group membership, heartbeats and offset commits for one consumer."""

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
        self.member = MemberContext(metadata, subs, config, client_id=client_id,
                                    auto_commit=auto_commit, clock=clock,
                                    wakeup_flag=wakeup_flag)
        self.discovery = CoordinatorDiscovery(self.member, on_found=self._on_found)
        self.heartbeat = HeartbeatThread(self.member, self.discovery)
        self.commits = OffsetCommitter(self.member, self.discovery, auto_commit=auto_commit,
                                       auto_commit_interval_ms=auto_commit_interval_ms)
        self.changes = PartitionChanges(subs, cooperative=config.cooperative,
                                        on_removed=on_assignment_changed)
        self.join_loop = JoinLoop(self.member, self.discovery, self.commits, self.changes,
                                  assignors, rack, on_answer=on_group_answer)

    def _on_found(self) -> None:
        self.heartbeat.wake()  # heartbeat at once if one is due

    @property
    def group_id(self) -> str:
        return self.member.group_id

    # ---- the user's poll ------------------------------------------------------------------

    def poll(self, deadline: float) -> bool:
        """Once per ``Consumer.poll`` round: keep membership alive; True when stable.

        ``deadline`` (seconds on the member's clock) bounds the coordinator lookup. The
        rebalance is never waited for (Kafka's ``poll(Duration)``, KIP-266): what needs no
        waiting runs now, a JoinGroup or SyncGroup whose answer has not come stays in flight
        and the next call resumes it; meanwhile a cooperative member fetches what it keeps.
        """
        m = self.member
        now = m.now_ms()
        with m.lock:
            m.machine.poll(now)
        m.raise_fatal()
        if not m.subs.auto_assigned:
            self.commits.maybe_auto_commit(now)
            return True
        self.heartbeat.start()
        if m.machine.coordinator is None and m.machine.fatal is None and \
                not self.discovery.ensure(deadline):
            return False  # heartbeats need it too, also while stable
        if m.machine.needs_rejoin() and \
                not self.join_loop.ensure_active_group(m.clock.now()):
            return False
        self.commits.maybe_auto_commit(m.now_ms())
        return True

    def request_rejoin(self, reason: str) -> None:
        """Join again on the next poll (the subscription changed)."""
        with self.member.lock:
            self.member.machine.request_rejoin(reason)

    def check_metadata(self) -> None:
        """After a metadata refresh: rejoin when topics or partition counts changed."""
        self.join_loop.check_metadata()

    def ensure_coordinator(self, deadline: float) -> bool:
        """Find the coordinator, blocking until ``deadline`` (seconds on the clock)."""
        return self.discovery.ensure(deadline)

    # ---- offsets ----------------------------------------------------------------------------

    def send_commit(self, offsets: Mapping[TopicPartition, Any]) -> Future[None]:
        return self.commits.send_commit(offsets)

    def commit_sync(self, offsets: Mapping[TopicPartition, Any], timeout_s: float,
                    interruptible: bool = False) -> None:
        self.commits.commit_sync(offsets, timeout_s, interruptible)

    def fetch_committed(self, partitions: Sequence[TopicPartition], timeout_s: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self.commits.fetch_committed(partitions, timeout_s)

    def poll_committed(self, partitions: Sequence[TopicPartition], deadline: float
                       ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        return self.commits.poll_committed(partitions, deadline)

    # ---- queries ----------------------------------------------------------------------------

    @property
    def coordinator_known(self) -> bool:
        return self.member.machine.coordinator is not None

    @property
    def member_id(self) -> str:
        return self.member.machine.member_id

    @property
    def generation(self) -> int:
        return self.member.machine.generation

    @property
    def state(self) -> str:
        """UNJOINED, REBALANCING or STABLE."""
        return self.member.machine.state.value

    def needs_rejoin(self) -> bool:
        return self.member.machine.needs_rejoin()

    def status(self) -> MemberStatus:
        """A consistent snapshot of the member (for tools and tests)."""
        m = self.member
        with m.lock:
            machine = m.machine
            return MemberStatus(
                state=machine.state.value, member_id=machine.member_id,
                generation=machine.generation, rejoin_pending=machine.needs_rejoin(),
                coordinator=machine.coordinator,
                heartbeat_in_flight=machine.heartbeat_in_flight,
                since_heartbeat_ok_ms=m.now_ms() - machine.last_heartbeat_ok,
                heartbeat_thread_alive=self.heartbeat.is_alive(),
                history=tuple(machine.history))

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
                m.send_leave(action, wait=True)

    def close(self, commit: bool, timeout_s: float = 10.0, leave_group: bool = True) -> None:
        """Commit (``commit`` and auto-commit on), leave the group (``leave_group``), stop
        the heartbeat thread. Without ``leave_group`` the member stays in the group until
        its session times out, as after a crash."""
        m = self.member
        try:
            if commit and self.commits.auto_commit:
                offsets = m.subs.consumed()
                if offsets and m.group_id:
                    try:
                        self.commits.commit_sync(offsets, timeout_s)
                    except KafkaError as exc:
                        log.info("final auto-commit failed: %s", exc)
            if leave_group and m.subs.auto_assigned:
                self.unsubscribe()
        finally:
            self.heartbeat.stop()
