"""A plug-in server assignor for the registry tests (loaded by class path)."""

from __future__ import annotations

import uuid

from samsa.assignors.server import GroupSpec, ServerAssignor, TopicsView


class Everything(ServerAssignor):
    """Gives every partition to the first member (by id) subscribed to its topic."""

    name = "everything"

    def assign(
        self, group: GroupSpec, topics: TopicsView
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in group.members}
        for t, info in topics.items():
            for m in sorted(group.members):
                if t in group.members[m].subscribed:
                    out[m][t] = frozenset(range(info.partitions))
                    break
        return out


NOT_AN_ASSIGNOR = object()
