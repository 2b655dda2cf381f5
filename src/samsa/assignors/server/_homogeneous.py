"""``uniform`` when every member subscribes to the same topics.

Priorities, as in Kafka: balance (member counts differ by at most one), then rack
matching, then stickiness.

1. Quotas: ``total // members`` each; the ``total % members`` extra slots go to the members
   that hold the most partitions now (ties by member id), so that keeping what one holds
   never costs balance.
2. Each member keeps its current partitions up to its quota, lowest (topic, partition)
   first. With racks in play, a partition on another rack than its holder is not kept yet.
3. With racks: unassigned partitions go to a same-rack member with room (partitions with
   the fewest same-rack members first, least loaded member first); then a partition on the
   wrong rack goes back to its holder if it has room.
4. The rest fill the members with room, in member order, in contiguous runs.

With racks, a member ends up with a partition on the wrong rack only if it still had room
after step 3, and then no free partition wanted its rack: so no swap of two wrong-rack
partitions could add a match, and assigning again from the result changes nothing.
"""

from __future__ import annotations

import heapq
import uuid

from samsa.assignors.server._common import Inputs, Owned, Racks, topic_order

Result = list[dict[uuid.UUID, frozenset[int]]]


def assign_homogeneous(inputs: Inputs, current: list[Owned], racks: Racks) -> Result:
    n = len(inputs.members)
    tids = topic_order(inputs.subscribed[0])
    counts = inputs.counts
    total = sum(counts[t] for t in tids)
    if total == 0:
        return [{} for _ in range(n)]
    quota = _quotas(total, [sum(map(len, o.values())) for o in current])
    if racks.active:
        return _RackFill(tids, counts, current, quota, racks).run()
    kept = [_keep(o, tids, quota[i]) for i, o in enumerate(current)]
    rem = [quota[i] - sum(map(len, k.values())) for i, k in enumerate(kept)]
    out: Result = kept
    free = _unassigned(tids, counts, kept)
    _fill_runs(free, [i for i in range(n) if rem[i] > 0], rem, out)
    return out


def _quotas(total: int, held: list[int]) -> list[int]:
    n = len(held)
    q, r = divmod(total, n)
    quota = [q] * n
    if r:
        for i in sorted(range(n), key=lambda i: (-held[i], i))[:r]:
            quota[i] += 1
    return quota


def _keep(owned: Owned, tids: list[uuid.UUID], quota: int) -> dict[uuid.UUID, frozenset[int]]:
    """The first ``quota`` partitions of ``owned`` in (topic, partition) order."""
    if sum(map(len, owned.values())) <= quota:
        return dict(owned)
    kept: dict[uuid.UUID, frozenset[int]] = {}
    for t in tids:
        parts = owned.get(t)
        if not parts or quota <= 0:
            continue
        if len(parts) <= quota:
            kept[t] = parts
            quota -= len(parts)
        else:
            kept[t] = frozenset(sorted(parts)[:quota])
            quota = 0
    return kept


def _unassigned(tids: list[uuid.UUID], counts: dict[uuid.UUID, int],
                owned: list[dict[uuid.UUID, frozenset[int]]]) -> list[tuple[uuid.UUID, list[int]]]:
    """Per topic (in order), the partitions nobody holds, ascending."""
    taken: dict[uuid.UUID, list[frozenset[int]]] = {}
    for o in owned:
        for t, ps in o.items():
            taken.setdefault(t, []).append(ps)
    free = []
    for t in tids:
        n = counts[t]
        sets = taken.get(t)
        if not sets:
            parts = list(range(n))
        else:
            held = frozenset().union(*sets)
            parts = [p for p in range(n) if p not in held] if len(held) < n else []
        if parts:
            free.append((t, parts))
    return free


def _fill_runs(free: list[tuple[uuid.UUID, list[int]]], members: list[int], rem: list[int],
               out: Result) -> None:
    """Hand the free partitions, in order, to ``members`` in contiguous runs."""
    k = 0  # index into free
    pos = 0  # position within free[k]
    for i in members:
        need = rem[i]
        while need > 0 and k < len(free):
            t, parts = free[k]
            take = parts[pos:pos + need]
            pos += len(take)
            need -= len(take)
            _add(out[i], t, frozenset(take))
            if pos >= len(parts):
                k += 1
                pos = 0
        rem[i] = need
    if k < len(free):
        raise AssertionError("uniform assignor left partitions unassigned")


def _add(owned: dict[uuid.UUID, frozenset[int]], t: uuid.UUID, parts: frozenset[int]) -> None:
    old = owned.get(t)
    owned[t] = parts if old is None else old | parts


class _RackFill:
    """Steps 2-4 of the module docstring when racks are in play."""

    def __init__(self, tids: list[uuid.UUID], counts: dict[uuid.UUID, int],
                 current: list[Owned], quota: list[int], racks: Racks) -> None:
        self.tids = tids
        self.counts = counts
        self.current = current
        self.quota = quota
        self.racks = racks
        n = len(quota)
        self.out: list[dict[uuid.UUID, set[int]]] = [{} for _ in range(n)]
        self.load = [0] * n
        self.previous: dict[tuple[uuid.UUID, int], int] = {}

    def give(self, i: int, t: uuid.UUID, p: int) -> None:
        self.out[i].setdefault(t, set()).add(p)
        self.load[i] += 1

    def run(self) -> Result:
        racks = self.racks
        order = {t: k for k, t in enumerate(self.tids)}
        for i, owned in enumerate(self.current):
            room = self.quota[i]
            for t in sorted(owned, key=order.__getitem__):
                for p in sorted(owned[t]):
                    if racks.mismatched(i, t, p):
                        self.previous[(t, p)] = i
                    elif room > 0:
                        self.give(i, t, p)
                        room -= 1
        taken: dict[uuid.UUID, set[int]] = {t: set() for t in self.tids}
        for o in self.out:
            for t, ps in o.items():
                taken[t] |= ps
        free = [(t, p) for t in self.tids for p in range(self.counts[t]) if p not in taken[t]]
        free = self._same_rack(free)
        rest: list[tuple[uuid.UUID, int]] = []
        for t, p in free:
            i = self.previous.get((t, p), -1)
            if i >= 0 and self.load[i] < self.quota[i]:
                self.give(i, t, p)
            else:
                rest.append((t, p))
        members = iter(range(len(self.quota)))
        i = next(members, -1)
        for t, p in rest:
            while self.load[i] >= self.quota[i]:
                i = next(members)
            self.give(i, t, p)
        return [{t: frozenset(ps) for t, ps in o.items() if ps} for o in self.out]

    def _same_rack(self, free: list[tuple[uuid.UUID, int]]) -> list[tuple[uuid.UUID, int]]:
        """Give free partitions to same-rack members with room; return the others."""
        racks = self.racks
        by_rack: dict[str, list[int]] = {}
        for i, r in enumerate(racks.member_rack):
            if r is not None:
                by_rack.setdefault(r, []).append(i)
        heaps = {r: [(self.load[i], i) for i in ms if self.load[i] < self.quota[i]]
                 for r, ms in by_rack.items()}
        for h in heaps.values():
            heapq.heapify(h)
        wanted = []
        left = []
        for t, p in free:
            rs = sorted(racks.racks_of(t, p) & racks.member_racks)
            if rs:
                wanted.append((sum(len(by_rack[r]) for r in rs), t, p, rs))
            else:
                left.append((t, p))
        order = {t: k for k, t in enumerate(self.tids)}
        wanted.sort(key=lambda w: (w[0], order[w[1]], w[2]))
        for _, t, p, rs in wanted:
            best = None
            for r in rs:
                h = heaps[r]
                while h and (h[0][0] != self.load[h[0][1]] or
                             self.load[h[0][1]] >= self.quota[h[0][1]]):
                    heapq.heappop(h)
                if h and (best is None or h[0] < best):
                    best = h[0]
            if best is None:
                left.append((t, p))
                continue
            i = best[1]
            self.give(i, t, p)
            if self.load[i] < self.quota[i]:
                rack = racks.member_rack[i]
                assert rack is not None
                heapq.heappush(heaps[rack], (self.load[i], i))
        left.sort(key=lambda tp: (order[tp[0]], tp[1]))
        return left
