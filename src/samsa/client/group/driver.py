"""The one interface ``Consumer`` drives its group membership through, whatever the protocol.

:class:`GroupDriver` runs a :class:`~samsa.client.group.machine.MemberMachine` over the
network from the user's thread (``Consumer.poll``, commits, ``close``) and a heartbeat
thread. It is put together from the shared parts around one
:class:`~samsa.client.group.context.MemberContext`:

* :mod:`~samsa.client.group.discovery`: FindCoordinator;
* :mod:`~samsa.client.group.heartbeat`: the heartbeat thread;
* :mod:`~samsa.client.group.commits`: OffsetCommit, OffsetFetch and auto-commit;
* :mod:`~samsa.client.group.listeners`: partition changes and the user's listener.

A protocol's driver (:class:`~samsa.client.group.classic_driver.ConsumerCoordinator`,
:class:`~samsa.client.group.consumer_driver.ConsumerProtocolCoordinator`) builds its machine
and says what differs: the rebalance step ``poll`` runs (the classic join loop, the
consumer protocol's reconciliation), how the heartbeat thread's requests are sent, how the
member leaves. ``poll`` never waits for a rebalance; every part takes the lock only around
the machine, never while waiting on the network or running user callbacks.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from samsa import TopicPartition
from samsa.client.errors import KafkaError
from samsa.client.future import Future
from samsa.client.group.commits import OffsetAndMetadata, OffsetCommitter
from samsa.client.group.context import MemberContext, MemberStatus
from samsa.client.group.discovery import CoordinatorDiscovery
from samsa.client.group.heartbeat import HeartbeatThread
from samsa.client.group.listeners import PartitionChanges
from samsa.client.group.machine import MemberMachine

__all__ = ["GroupDriver"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=MemberMachine[Any])


class GroupDriver(ABC, Generic[M]):
    """Group membership, heartbeats and offset commits for one consumer."""

    committer: type[OffsetCommitter] = OffsetCommitter
    """The commit part (a protocol may commit differently)."""

    def __init__(self, member: MemberContext[M], *, auto_commit: bool,
                 auto_commit_interval_ms: int, cooperative: bool,
                 on_assignment_changed: Callable[[set[TopicPartition]], None]) -> None:
        self.member = member
        self.discovery = CoordinatorDiscovery(member, on_found=self._on_found)
        self.heartbeat = HeartbeatThread(member, self.discovery, self._heartbeat_action)
        self.commits = self.committer(member, self.discovery, auto_commit=auto_commit,
                                      auto_commit_interval_ms=auto_commit_interval_ms)
        self.changes = PartitionChanges(member.subs, cooperative=cooperative,
                                        on_removed=on_assignment_changed)

    def _on_found(self) -> None:
        self.heartbeat.wake()  # heartbeat at once if one is due

    @property
    def group_id(self) -> str:
        return self.member.group_id

    # ---- what a protocol provides ---------------------------------------------------------

    @abstractmethod
    def _heartbeat_action(self, action: object) -> None:
        """Send what the heartbeat thread's round asks for (never blocks)."""

    @abstractmethod
    def _rebalance(self) -> bool:
        """``poll``'s step of the protocol (join, reconcile), which waits for no answer;
        False: ``poll`` stops there (a request stays in flight)."""

    def _polled(self) -> None:
        """Right after the machine heard of the poll."""

    def _needs_coordinator(self) -> bool:
        """True when ``poll`` must find the coordinator before its rebalance step."""
        return True

    @abstractmethod
    def request_rejoin(self, reason: str) -> None:
        """The subscription changed."""

    def check_metadata(self) -> None:
        """After a metadata refresh (the classic protocol rejoins when partitions changed)."""

    @abstractmethod
    def unsubscribe(self) -> None:
        """Release the partitions and leave the group."""

    def _remain(self) -> None:
        """``close(leave_group=False)``: what a member sends when it stays in the group."""

    # ---- the user's poll ------------------------------------------------------------------

    def poll(self, deadline: float) -> bool:
        """Once per ``Consumer.poll`` round: keep membership alive; True when stable.

        ``deadline`` (seconds on the member's clock) bounds the coordinator lookup. The
        rebalance is never waited for (Kafka's ``poll(Duration)``, KIP-266): what needs no
        waiting runs now, a request whose answer has not come stays in flight and the next
        call goes on with it.
        """
        m = self.member
        with m.lock:
            m.machine.poll(m.now_ms())
        self._polled()
        if not m.subs.auto_assigned:
            m.raise_fatal()
            self.commits.maybe_auto_commit(m.now_ms())
            return True
        self.heartbeat.start()
        if m.machine.coordinator is None and m.machine.fatal is None and \
                self._needs_coordinator() and not self.discovery.ensure(deadline):
            return False  # heartbeats need it too, also while stable
        if not self._rebalance():
            return False
        stable = not m.machine.needs_rejoin()
        self.commits.maybe_auto_commit(m.now_ms())
        return stable

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
        """The generation (classic) or member epoch (consumer)."""
        return self.member.machine.generation

    @property
    def state(self) -> str:
        """The protocol's member state (classic: UNJOINED, REBALANCING, STABLE)."""
        return str(self.member.machine.state.value)

    def needs_rejoin(self) -> bool:
        return self.member.machine.needs_rejoin()

    def status(self) -> MemberStatus:
        """A consistent snapshot of the member (for tools and tests)."""
        return self.member.status(self.heartbeat.is_alive())

    # ---- leaving ----------------------------------------------------------------------------

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
            if m.subs.auto_assigned:
                if leave_group:
                    self.unsubscribe()
                else:
                    self._remain()
        finally:
            self.heartbeat.stop()
