"""The ``uniform`` server-side assignor (Kafka's default for the ``consumer`` protocol):
balanced and sticky, rack-aware where members send racks and partitions have racks."""

from __future__ import annotations

import uuid

from samsa.assignors._gc import gc_paused
from samsa.assignors.server._common import Racks, finish, prepare, valid_current
from samsa.assignors.server._heterogeneous import assign_heterogeneous
from samsa.assignors.server._homogeneous import assign_homogeneous
from samsa.assignors.server.interface import GroupSpec, ServerAssignor, TopicsView

__all__ = ["UniformAssignor"]


class UniformAssignor(ServerAssignor):
    """Spreads partitions evenly over the members and keeps the current target assignment
    where balance allows.

    - Every member subscribes to the same topics: member counts differ by at most one.
    - Otherwise, topic by topic: no member holding a partition of a topic has two more
      partitions than another subscriber of that topic (so members with the same
      subscriptions differ by at most one).
    - With racks (members send ``rack_id`` and partitions' replicas sit on some but not all
      of the same racks), a partition goes to a member on one of its replica racks where
      balance allows (balance > rack matching > stickiness, as Kafka orders them).

    Topics a member subscribes to but the topics view does not know are ignored.
    """

    name = "uniform"

    def assign(
        self, group: GroupSpec, topics: TopicsView
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        with gc_paused():
            inputs = prepare(group, topics)
            if not inputs.members:
                return {}
            held = valid_current(group, inputs)
            racks = Racks(inputs, topics)
            if inputs.homogeneous():
                owned = assign_homogeneous(inputs, held, racks)
            else:
                owned = assign_heterogeneous(inputs, held, racks)
            return finish(inputs, owned)
