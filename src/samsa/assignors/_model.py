"""Compact internal model shared by the strategies.

Topics are sorted and numbered; partition ``p`` of topic ``t`` is the global index
``offsets[t] + p`` so that index order is (topic, partition) order. Members are numbered in
Java ``String`` order of their member ids. Strategies work on these integers and build
:class:`TopicPartition` objects only for the final answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from itertools import repeat

from samsa import TopicPartition
from samsa.assignors.interface import Assignment, ClusterView, Subscription, java_order

NO_OWNER = -1
DISPUTED = -2
"""Owner value of a partition claimed by two members in the same (highest) generation."""

_new_tp = partial(tuple.__new__, TopicPartition)


class Claims:
    """Partitions one member claims to own, and the generation of the claim.

    Either grouped by topic (decoded sticky user data) or (topic, partition) pairs.
    """

    __slots__ = ("generation", "groups", "pairs")

    def __init__(
        self,
        generation: int,
        *,
        groups: Sequence[tuple[str, Sequence[int]]] = (),
        pairs: Sequence[tuple[str, int]] = (),
    ) -> None:
        self.generation = generation
        self.groups = groups
        self.pairs = pairs


class Model:
    """Subscribed, existing topics and members of one assignment call, as integers."""

    __slots__ = (
        "counts",
        "member_ids",
        "member_topics",
        "offsets",
        "racks",
        "topic_index",
        "topic_members",
        "topics",
        "total",
    )

    def __init__(self, cluster: ClusterView, subscriptions: Mapping[str, Subscription]) -> None:
        self.member_ids: list[str] = sorted(subscriptions, key=java_order)
        # Members usually share a few distinct subscriptions: work per distinct topic list.
        by_topics: dict[tuple[str, ...], list[int]] = {}
        for m, member in enumerate(self.member_ids):
            by_topics.setdefault(tuple(subscriptions[member].topics), []).append(m)
        wanted = {t for topics in by_topics for t in topics}
        known = cluster.partitions_per_topic
        self.topics: list[str] = sorted(t for t in wanted if known.get(t, 0) > 0)
        self.topic_index: dict[str, int] = {t: i for i, t in enumerate(self.topics)}
        self.counts: list[int] = [known[t] for t in self.topics]
        self.offsets: list[int] = [0]
        for n in self.counts:
            self.offsets.append(self.offsets[-1] + n)
        self.total: int = self.offsets[-1]
        self.member_topics: list[list[int]] = [[] for _ in self.member_ids]
        self.topic_members: list[list[int]] = [[] for _ in self.topics]
        for topics, members in by_topics.items():
            subscribed = sorted({self.topic_index[t] for t in topics if t in self.topic_index})
            for m in members:
                self.member_topics[m] = subscribed
            for t in subscribed:
                self.topic_members[t].extend(members)
        if len(by_topics) > 1:
            for members in self.topic_members:
                members.sort()
        self.racks: list[str | None] = [subscriptions[m].rack_id for m in self.member_ids]

    @property
    def uniform(self) -> bool:
        """True when every member subscribes to every topic (Kafka's constrained case)."""
        return all(len(ts) == len(self.topics) for ts in self.member_topics)

    def resolve_owners(
        self, claims: Sequence[Claims], unsubscribed: dict[int, int] | None = None
    ) -> list[int]:
        """Current owner per global partition from each member's claims (in member order).

        A claim counts only for a topic the member still subscribes to. The highest
        generation wins; equal generations from two members make the partition DISPUTED.
        Claims on topics the claimant no longer subscribes to are collected in
        ``unsubscribed`` (partition -> member) when given: the claimant may still hold them.
        """
        owner = [NO_OWNER] * self.total
        best = [-(2**31) - 1] * self.total
        info = {
            topic: (t, self.offsets[t], n)
            for t, (topic, n) in enumerate(zip(self.topics, self.counts, strict=True))
        }
        everything = len(self.topics)
        for m, claim in enumerate(claims):
            generation = claim.generation
            subscribed = self.member_topics[m]
            allowed = None if len(subscribed) == everything else set(subscribed)
            for topic, partitions in claim.groups:
                entry = info.get(topic)
                if entry is None:
                    continue
                t, base, n = entry
                if allowed is not None and t not in allowed:
                    if unsubscribed is not None:
                        for p in partitions:
                            if 0 <= p < n:
                                unsubscribed[base + p] = m
                    continue
                for p in partitions:
                    if not 0 <= p < n:
                        continue
                    g = base + p
                    if generation > best[g]:
                        owner[g] = m
                        best[g] = generation
                    elif generation == best[g] and owner[g] != m:
                        owner[g] = DISPUTED
            last: str | None = None
            base = n = 0
            mine = False
            for topic, p in claim.pairs:
                if topic is not last:
                    last = topic
                    entry = info.get(topic)
                    if entry is None:
                        n = 0
                        continue
                    t, base, n = entry
                    mine = allowed is None or t in allowed
                if not 0 <= p < n:
                    continue
                g = base + p
                if not mine:
                    if unsubscribed is not None:
                        unsubscribed[g] = m
                elif generation > best[g]:
                    owner[g] = m
                    best[g] = generation
                elif generation == best[g] and owner[g] != m:
                    owner[g] = DISPUTED
        return owner

    def topic_partitions(self) -> list[TopicPartition]:
        """All partitions as TopicPartition, in global index order."""
        out: list[TopicPartition] = []
        for topic, n in zip(self.topics, self.counts, strict=True):
            out.extend(map(_new_tp, zip(repeat(topic, n), range(n), strict=True)))
        return out

    def answer(
        self, per_member: Sequence[list[int]], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Turn per-member global indices into Assignments (sorted) for every member."""
        tps = self.topic_partitions()
        get = tps.__getitem__
        result: dict[str, Assignment] = {}
        for m, member in enumerate(self.member_ids):
            indices = per_member[m]
            indices.sort()
            result[member] = Assignment(tuple(map(get, indices)))
        for member in subscriptions:
            result.setdefault(member, Assignment(()))
        return result

    def partition_racks(self, cluster: ClusterView) -> list[Sequence[frozenset[str]]] | None:
        """Replica racks per topic number, or None when rack-aware placement does not apply.

        Kafka's rule (``AbstractPartitionAssignor.useRackAwareAssignment``, KIP-881): racks
        are used when some member's rack holds a replica and not every partition has replicas
        on all the racks that hold replicas. So a cluster whose brokers all share one rack
        never uses them.
        """
        if not any(self.racks) or not cluster.partition_racks:
            return None
        topics: list[Sequence[frozenset[str]]] = [
            [cluster.racks_of(topic, p) for p in range(n)]
            for topic, n in zip(self.topics, self.counts, strict=True)
        ]
        member_racks = {r for r in self.racks if r}
        return topics if rack_aware(member_racks, [r for t in topics for r in t]) else None


def rack_aware(member_racks: set[str], partition_racks: Sequence[frozenset[str]]) -> bool:
    """Kafka's ``useRackAwareAssignment`` on member racks and per-partition replica racks."""
    every = frozenset().union(*partition_racks)
    if member_racks.isdisjoint(every):
        return False
    return any(r != every for r in partition_racks)
