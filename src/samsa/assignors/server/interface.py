"""The server-side assignor interface of the ``consumer`` group protocol (KIP-848).

The group coordinator, not a member, computes the target assignment. It calls
:meth:`ServerAssignor.assign` with a :class:`GroupSpec` (every member's subscription and the
current target assignment, for stickiness) and a :class:`TopicsView` (partition counts and
replica racks of the subscribed topics). Topics are named by their ids, as on the wire.
Assignors are pure and deterministic: the same inputs give the same assignment.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "Assignment",
    "GroupSpec",
    "MemberSpec",
    "ServerAssignor",
    "TopicInfo",
    "TopicsView",
]

#: One member's partitions: topic id -> partition indexes.
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What the assignor knows of one member."""

    member_id: str
    subscribed: frozenset[uuid.UUID]
    """Ids of the existing topics the member subscribes to (names and regex resolved)."""
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The members and the current target assignment (empty for a new member)."""

    members: Mapping[str, MemberSpec]
    current: Mapping[str, Assignment] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic: its partition count and, when known, each partition's replica racks."""

    topic_id: uuid.UUID
    name: str
    partitions: int
    racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


#: The subscribed topics, by id.
TopicsView = Mapping[uuid.UUID, TopicInfo]


class ServerAssignor(abc.ABC):
    """A server-side assignor, named as in ``group.consumer.assignors``."""

    name: str

    @abc.abstractmethod
    def assign(
        self, group: GroupSpec, topics: TopicsView
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """The target assignment: member id -> topic id -> partitions.

        Every member of ``group.members`` appears in the result (possibly with nothing).
        A partition goes to at most one member, and only to a member subscribed to its topic.
        """
