"""The rebalance of an epoch protocol (KIP-848 ``consumer``): reconciliation, user's thread.

The rebalance step of :mod:`~samsa.client.group.epoch_driver`'s ``poll`` (the consumer
protocol's); the classic protocol's sibling is :mod:`~samsa.client.group.classic_rebalance`.
The coordinator sends a target assignment by topic id in a heartbeat answer;
:meth:`Reconciler.run` resolves the ids through metadata (a refresh when one is unknown; the
known part is reconciled meanwhile) and performs what
:meth:`~samsa.client.group.epoch_machine.EpochMembership.user_step` returns: report lost
partitions, raise an error (fatal, or for this poll only), or reconcile (auto-commit,
revoke, assign, each only while the plan still holds). The machine then acknowledges with
its next heartbeat, which the heartbeat thread is woken to send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from samsa.client.errors import KafkaError, error_for
from samsa.client.group.actions import LosePartitions, RaiseError
from samsa.client.group.commits import OffsetCommitter
from samsa.client.group.context import MemberContext
from samsa.client.group.epoch_machine import EpochAction, EpochMembership, Reconcile
from samsa.client.group.listeners import ASSIGNED, PartitionChanges
from samsa.client.subscription import SubscriptionType

__all__ = ["Reconciler"]

log = logging.getLogger(__name__)

EM = TypeVar("EM", bound=EpochMembership[Any, Any])

MAX_STEPS = 10
"""Steps one :meth:`Reconciler.run` takes at most (each waits for nothing)."""


class Reconciler(Generic[EM]):
    """Moves the consumer to the machine's target assignment; ``wake`` runs the heartbeat
    thread's next round (to send the acknowledgement)."""

    def __init__(self, member: MemberContext[EM],
                 commits: OffsetCommitter, changes: PartitionChanges,
                 wake: Callable[[], None]) -> None:
        self.member = member
        self.commits = commits
        self.changes = changes
        self.wake = wake
        self._next_resolve = 0.0

    def run(self) -> None:
        """The user thread's part of the protocol (``poll`` runs it): release lost
        partitions, raise a fatal error, reconcile a new assignment."""
        m = self.member
        for _ in range(MAX_STEPS):
            names = self._names()
            with m.lock:
                actions = m.machine.user_step(m.now_ms(), names, frozenset(m.subs.assignment))
            if not actions:
                return
            for action in actions:
                self._perform(action)

    def _names(self) -> dict[Any, str]:
        """Topic id -> name from metadata, refreshed (at most once a backoff) when the
        target names an id it does not know."""
        m = self.member
        names = m.metadata.cluster.topic_names
        with m.lock:
            missing = m.machine.unresolved(names)
        now = m.clock.now()
        if missing and now >= self._next_resolve:
            self._next_resolve = now + m.config.retry_backoff_ms / 1000
            topics = None if m.subs.type == SubscriptionType.PATTERN else m.subs.topics
            try:
                names = m.metadata.refresh(topics, 5.0).topic_names
                if any(t not in names for t in missing) and topics is not None:
                    names = m.metadata.refresh(None, 5.0).topic_names
            except KafkaError as exc:
                log.debug("metadata refresh for assigned topic ids failed: %s", exc)
        return names

    def _perform(self, action: EpochAction) -> None:
        m = self.member
        if isinstance(action, RaiseError):
            raise error_for(action.code, action.message)  # fatal, or for this poll only
        elif isinstance(action, LosePartitions):
            try:
                self.changes.lose(action.partitions)
            finally:
                with m.lock:
                    m.machine.released(m.now_ms())
                self.wake()
        elif isinstance(action, Reconcile):
            self._reconcile(action)

    def _valid(self, plan: Reconcile) -> bool:
        with self.member.lock:
            return self.member.machine.reconcile_valid(plan)

    def _reconcile(self, plan: Reconcile) -> None:
        """Commit (auto-commit), revoke, assign, each only while the plan still holds;
        then the machine acknowledges with the next heartbeat."""
        m = self.member
        ok = False
        try:
            if plan.commit:
                self.commits.commit_before_revoke()
            if self._valid(plan) and plan.revoked:
                self.changes.revoke(plan.revoked)
            if self._valid(plan):
                self.changes.assign(plan.assignment)
                self.commits.restart_auto_commit_timer()
                self.changes.call(ASSIGNED, plan.added)
            ok = True
        finally:
            with m.lock:
                m.machine.reconciled(plan, m.now_ms(), ok)
            self.wake()
