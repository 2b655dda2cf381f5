"""The share groups' server assignor, ``simple`` (Kafka's name): every subscribed partition
goes to at least one member, and when a topic has fewer partitions than subscribed members,
its partitions are shared so that every member gets one.

Per topic (by name), the subscribed members ordered by the load given so far (then id):
with at least as many partitions as members, partitions are dealt round-robin; with fewer,
member ``k`` gets partition ``k mod partitions``. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.assignors.server.interface import TopicInfo
from samsa.coordinator.share.group import Assignment


def assign(subscriptions: Mapping[str, tuple[str, ...]],
           topics: Mapping[str, TopicInfo]) -> dict[str, Assignment]:
    """Member id -> its assignment, from each member's subscribed topic names and the
    topics that exist (by name)."""
    load = dict.fromkeys(sorted(subscriptions), 0)
    out: dict[str, Assignment] = {m: {} for m in load}
    for name in sorted({t for names in subscriptions.values() for t in names}):
        info = topics.get(name)
        if info is None or info.partitions <= 0:
            continue
        members = sorted((m for m, names in subscriptions.items() if name in names),
                         key=lambda m: (load[m], m))
        given: dict[str, list[int]] = {m: [] for m in members}
        if info.partitions >= len(members):
            for p in range(info.partitions):
                given[members[p % len(members)]].append(p)
        else:
            for k, m in enumerate(members):
                given[m].append(k % info.partitions)
        for m, parts in given.items():
            out[m][info.topic_id] = tuple(parts)
            load[m] += len(parts)
    return out
