"""Where each partition should live: rendezvous hashing with bounded loads.

Every node computes the same answer from the same live set, so no node assigns partitions
to others. Each topic is spread on its own: every (partition, node) pair has a weight (a
hash of both), and the pairs are taken heaviest first, a partition going to the pair's node
while that node has room. The room is the topic's share, partitions / nodes: the
remainder's nodes (the first to fill up) hold one more. So each node leads either
⌊partitions / nodes⌋ or ⌈partitions / nodes⌉ of a topic, and when a node joins or leaves,
mostly the partitions whose heaviest pair changed move (a few more move where a share
shrinks under the new count).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence


def _weight(pid: int, node: int) -> int:
    digest = hashlib.blake2b(f"{pid}/{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _spread(pids: list[int], live: list[int]) -> dict[int, int]:
    """One topic's partitions over ``live``, each node getting its share."""
    share, remainder = divmod(len(pids), len(live))
    pairs = sorted(((_weight(pid, node), node, pid) for pid in pids for node in live),
                   reverse=True)
    load = dict.fromkeys(live, 0)
    larger = 0  # nodes already holding share + 1
    out: dict[int, int] = {}
    for _, node, pid in pairs:
        room = share + 1 if larger < remainder else share
        if pid in out or load[node] >= room:
            continue
        out[pid] = node
        load[node] += 1
        if load[node] == share + 1:
            larger += 1
        if len(out) == len(pids):
            break
    return out


def plan(topics: Mapping[int, str], nodes: Sequence[int]) -> dict[int, int | None]:
    """Preferred owner of each partition id of ``topics`` (pid -> topic name) among
    ``nodes``; None for every partition when no node is live."""
    live = sorted(set(nodes))
    if not live:
        return dict.fromkeys(topics)
    by_topic: dict[str, list[int]] = {}
    for pid, name in topics.items():
        by_topic.setdefault(name, []).append(pid)
    out: dict[int, int | None] = {}
    for pids in by_topic.values():
        out.update(_spread(pids, live))
    return out
