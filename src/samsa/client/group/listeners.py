"""The partition changes of a rebalance: applied to the subscription, then told to the user.

The state machine decides *what* moves
(:class:`~samsa.client.group.actions.RevokePartitions`,
:class:`~samsa.client.group.actions.LosePartitions`, the classic
:class:`~samsa.client.group.classic_machine.AssignPartitions`, the consumer protocol's
:class:`~samsa.client.group.epoch_machine.Reconcile`); :class:`PartitionChanges` applies it
to the :class:`~samsa.client.subscription.SubscriptionState`, drops buffered fetches of the
partitions that left, and calls the user's rebalance listener on the user's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Set

from samsa import TopicPartition
from samsa.client.subscription import SubscriptionState

__all__ = ["PartitionChanges"]

ASSIGNED = "on_partitions_assigned"
REVOKED = "on_partitions_revoked"
LOST = "on_partitions_lost"


class PartitionChanges:
    """Applies assignment changes and calls the listener of ``subs``.

    ``on_removed(partitions)`` runs after partitions leave the assignment (the consumer
    drops their buffered fetches).
    """

    def __init__(self, subs: SubscriptionState, *, cooperative: bool,
                 on_removed: Callable[[set[TopicPartition]], None]) -> None:
        self.subs = subs
        self.cooperative = cooperative
        self.on_removed = on_removed

    def revoke(self, partitions: Set[TopicPartition]) -> None:
        """Call ``on_partitions_revoked``, then drop the partitions whatever it did."""
        try:
            self.call(REVOKED, partitions)
        finally:  # the machine no longer owns them, whatever the listener did
            if not self.cooperative:
                self.subs.set_assignment(())
            else:
                self.subs.set_assignment([tp for tp in self.subs.assignment
                                          if tp not in partitions])
            self.on_removed(set(partitions))

    def lose(self, partitions: Set[TopicPartition]) -> None:
        """Drop every partition (they belong to others already), then tell the listener."""
        self.subs.set_assignment(())
        self.on_removed(set(partitions))
        self.call(LOST, partitions)

    def assign(self, assignment: Set[TopicPartition]) -> None:
        """Take ``assignment`` (the state machine checked it against the subscription)."""
        self.subs.set_assignment(assignment)

    def call(self, name: str, partitions: Set[TopicPartition]) -> None:
        """Call listener method ``name`` (lost falls back to revoked); an empty revocation
        or loss is not reported, an empty assignment is."""
        listener = self.subs.listener
        if listener is None:
            return
        if name == LOST and not hasattr(listener, name):
            name = REVOKED
        if name != ASSIGNED and not partitions:
            return
        method = getattr(listener, name, None)
        if method is not None:
            method(set(partitions))
