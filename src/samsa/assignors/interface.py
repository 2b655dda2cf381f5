"""The assignor interface: subscriptions, assignments, cluster view, registry.

An assignor runs on the group leader. Every member sends a :class:`Subscription` in its
JoinGroup request (encoded by :mod:`samsa.assignors.codec`); the leader calls
:meth:`Assignor.assign` with the cluster view and all subscriptions, and sends each member its
:class:`Assignment` in SyncGroup; every member then gets :meth:`Assignor.on_assignment`.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from samsa import TopicPartition

__all__ = [
    "Assignment",
    "Assignor",
    "ClusterView",
    "PartitionAssignor",
    "RebalanceProtocol",
    "Subscription",
    "assignor_names",
    "java_order",
    "register_assignor",
    "resolve_assignor",
]


class RebalanceProtocol(enum.Enum):
    """How members give up partitions (KIP-429)."""

    EAGER = 0
    """Every member revokes everything before it rejoins."""
    COOPERATIVE = 1
    """Members keep their partitions and revoke only what the leader withholds."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """What one member sends in JoinGroup (ConsumerProtocolSubscription v0-v3).

    ``group_instance_id`` is not part of the encoded subscription: the coordinator reports it
    next to each member in the JoinGroup response, and the leader fills it in.
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one member receives in SyncGroup (ConsumerProtocolAssignment v0-v3)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The metadata an assignor sees: partition counts and, optionally, replica racks.

    ``partition_racks[topic][p]`` is the set of racks holding replicas of partition ``p``.
    """

    partitions_per_topic: Mapping[str, int]
    partition_racks: Mapping[str, Sequence[frozenset[str]]] = field(default_factory=dict)

    def racks_of(self, topic: str, partition: int) -> frozenset[str]:
        """Replica racks of one partition (empty when unknown)."""
        racks = self.partition_racks.get(topic)
        if racks is None or partition >= len(racks):
            return frozenset()
        return racks[partition]


def java_order(member_id: str) -> bytes:
    """Sort key ordering strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return member_id.encode("utf-16-be", "surrogatepass")


class Assignor(abc.ABC):
    """A partition assignment strategy.

    Subclasses set ``name`` (the protocol name members vote on) and implement :meth:`assign`.
    Strategies must be deterministic (sort their inputs) and keep per-consumer state only on
    the instance, never in class attributes.
    """

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    @property
    def cooperative(self) -> bool:
        """True when members may keep their partitions across a rebalance."""
        return RebalanceProtocol.COOPERATIVE in self.supported_protocols

    def user_data(self, topics: Sequence[str]) -> bytes | None:
        """Extra bytes this member sends in its subscription (none by default)."""
        return None

    def metadata(
        self,
        topics: Iterable[str],
        *,
        owned: Iterable[TopicPartition] = (),
        generation: int = -1,
        rack: str | None = None,
    ) -> Subscription:
        """The subscription this member sends in JoinGroup."""
        sorted_topics = tuple(sorted(set(topics)))
        return Subscription(
            topics=sorted_topics,
            user_data=self.user_data(sorted_topics),
            owned_partitions=tuple(sorted(owned)),
            generation_id=generation,
            rack_id=rack,
        )

    @abc.abstractmethod
    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Assign the partitions of subscribed topics to members (leader only)."""

    def on_assignment(self, assignment: Assignment, generation: int) -> None:  # noqa: B027
        """Called on every member with its assignment for ``generation``."""


class PartitionAssignor(Assignor):
    """Convenience base: implement :meth:`assign_partitions` on plain counts and topic lists.

    The counterpart of Kafka's ``AbstractPartitionAssignor``: user data is ignored, topics that
    the cluster does not know are skipped, and every member gets an assignment.
    """

    @abc.abstractmethod
    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Mapping[str, Sequence[TopicPartition]]:
        """Return member id -> partitions; topics are already filtered to known ones."""

    def assign(
        self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        wanted = {t for s in subscriptions.values() for t in s.topics}
        counts = {
            t: n for t, n in cluster.partitions_per_topic.items() if t in wanted and n > 0
        }
        result = self.assign_partitions(counts, subscriptions)
        return {
            member: Assignment(tuple(sorted(result.get(member, ()))))
            for member in subscriptions
        }


_A = TypeVar("_A", bound=type[Assignor])
_REGISTRY: dict[str, type[Assignor]] = {}
_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def register_assignor(cls: _A) -> _A:
    """Class decorator: make ``cls`` resolvable by its protocol name."""
    _REGISTRY[cls.name] = cls
    return cls


def assignor_names() -> list[str]:
    """Protocol names of all registered strategies."""
    return sorted(_REGISTRY)


def resolve_assignor(item: str | type[Assignor] | Assignor) -> Assignor:
    """Turn an entry of ``partition_assignment_strategy`` into an assignor instance.

    Accepts a protocol name (``"range"``, ``"cooperative-sticky"``, Kafka's Java class names),
    an :class:`Assignor` subclass (instantiated without arguments) or an instance.
    """
    if isinstance(item, Assignor):
        return item
    if isinstance(item, str):
        cls = _REGISTRY.get(_JAVA_NAMES.get(item, item))
        if cls is None:
            raise ValueError(f"unknown partition assignment strategy {item!r}")
        return cls()
    if isinstance(item, type) and issubclass(item, Assignor):
        return item()
    raise TypeError(f"not an assignor: {item!r}")
