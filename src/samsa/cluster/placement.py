"""Where each partition should live: rendezvous hashing with bounded loads.

Every node computes the same answer from the same live set, so no node assigns partitions
to others. Within each topic, partitions are taken in order and each goes to the node of
highest weight (a hash of partition and node) that still has room, the room being the
topic's fair share (partitions / nodes, rounded up): each topic is spread evenly, and when a
node joins or leaves mostly the partitions whose best node changed move.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence


def _weight(pid: int, node: int) -> int:
    digest = hashlib.blake2b(f"{pid}/{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


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
        pids.sort()
        room = -(-len(pids) // len(live))
        load = dict.fromkeys(live, 0)
        for pid in pids:
            ranked = sorted(live, key=lambda n: (_weight(pid, n), n),
                            reverse=True)
            node = next(n for n in ranked if load[n] < room)
            load[node] += 1
            out[pid] = node
    return out
