"""``uniform`` when every member subscribes to the same topics.

Priorities, as in Kafka: balance (member counts differ by at most one), then rack
matching, then stickiness.

1. Quotas: ``total // members`` each; the ``total % members`` extra slots go to the members
   that hold the most partitions now (ties by member id), so that keeping what one holds
   never costs balance.
2. Each member keeps its current partitions up to its quota, lowest (topic, partition)
   first. With racks in play, a partition on another rack than its holder is not kept yet.
3. With racks: free partitions go to a same-rack member with room (partitions with the
   fewest same-rack members first, shared level by level, least loaded member first); then
   a partition on the wrong rack goes back to its holder if it has room.
4. The rest fill the members with room, in member order, in contiguous runs.

With racks, a member ends up with a partition on the wrong rack only if it still had room
after step 3, and then no free partition wanted its rack: so no swap of two wrong-rack
partitions could add a match, and assigning again from the result changes nothing.
"""

from __future__ import annotations

import itertools
import operator
import uuid

from samsa.assignors.server._common import Held, Inputs, Out, Racks

Parts = list[tuple[int, frozenset[int]]]


def assign_homogeneous(inputs: Inputs, held: list[Held], racks: Racks) -> list[Out]:
    n = len(inputs.members)
    topics = sorted(inputs.subscribed[0])
    total = sum(inputs.counts[k] for k in topics)
    if total == 0:
        return [{} for _ in range(n)]
    quota = _quotas(total, [h.size for h in held])
    if racks.active:
        return _RackFill(inputs, topics, held, quota, racks).run()
    ids = inputs.topics.ids
    out: list[Out] = []
    kept: list[Parts] = []
    rem: list[int] = []
    for i, h in enumerate(held):
        if h.size <= quota[i]:
            out.append(h.out(ids))
            kept.append(h.parts)
            rem.append(quota[i] - h.size)
        else:
            parts = _keep(h.parts, quota[i])
            out.append({ids[k]: ps for k, ps in parts})
            kept.append(parts)
            rem.append(0)
    free = _unassigned(topics, inputs.counts, kept)
    _fill_runs(free, [i for i in range(n) if rem[i] > 0], rem, out, ids)
    return out


def _quotas(total: int, held: list[int]) -> list[int]:
    n = len(held)
    q, r = divmod(total, n)
    quota = [q] * n
    if r:
        for i in sorted(range(n), key=lambda i: (-held[i], i))[:r]:
            quota[i] += 1
    return quota


def _keep(parts: Parts, quota: int) -> Parts:
    """The first ``quota`` partitions of ``parts`` in (topic, partition) order."""
    kept: Parts = []
    for k, ps in parts:
        if quota <= 0:
            break
        if len(ps) <= quota:
            kept.append((k, ps))
            quota -= len(ps)
        else:
            kept.append((k, frozenset(sorted(ps)[:quota])))
            quota = 0
    return kept


def _unassigned(topics: list[int], counts: list[int], kept: list[Parts]
                ) -> list[tuple[int, list[int]]]:
    """Per topic (in order), the partitions nobody keeps, ascending."""
    taken: list[list[frozenset[int]]] = [[] for _ in counts]
    for parts in kept:
        for k, ps in parts:
            taken[k].append(ps)
    free = []
    for k in topics:
        n = counts[k]
        if not taken[k]:
            left = list(range(n))
        else:
            held = frozenset().union(*taken[k])
            left = [p for p in range(n) if p not in held] if len(held) < n else []
        if left:
            free.append((k, left))
    return free


def _fill_runs(free: list[tuple[int, list[int]]], members: list[int], rem: list[int],
               out: list[Out], ids: list[uuid.UUID]) -> None:
    """Hand the free partitions, in order, to ``members`` in contiguous runs."""
    f = 0  # index into free
    pos = 0  # position within free[f]
    for i in members:
        need = rem[i]
        while need > 0 and f < len(free):
            k, parts = free[f]
            take = parts[pos:pos + need]
            pos += len(take)
            need -= len(take)
            mine, t = out[i], ids[k]
            old = mine.get(t)
            mine[t] = frozenset(take) if old is None else old.union(take)
            if pos >= len(parts):
                f += 1
                pos = 0
        rem[i] = need
    if f < len(free):
        raise AssertionError("uniform assignor left partitions unassigned")


class _RackFill:
    """Steps 2-4 of the module docstring when racks are in play."""

    def __init__(self, inputs: Inputs, topics: list[int], held: list[Held], quota: list[int],
                 racks: Racks) -> None:
        self.ids = inputs.topics.ids
        self.counts = inputs.counts
        self.topics = topics
        self.held = held
        self.quota = quota
        self.racks = racks
        n = len(quota)
        self.out: list[dict[int, set[int]]] = [{} for _ in range(n)]
        self.load = [0] * n
        self.previous: dict[tuple[int, int], int] = {}

    def give(self, i: int, k: int, p: int) -> None:
        self.out[i].setdefault(k, set()).add(p)
        self.load[i] += 1

    def run(self) -> list[Out]:
        racks = self.racks
        for i, h in enumerate(self.held):
            room = self.quota[i]
            for k, ps in h.parts:
                for p in sorted(ps):
                    if racks.mismatched(i, k, p):
                        self.previous[(k, p)] = i
                    elif room > 0:
                        self.give(i, k, p)
                        room -= 1
        taken: list[set[int]] = [set() for _ in self.counts]
        for o in self.out:
            for k, given in o.items():
                taken[k] |= given
        free = [(k, p) for k in self.topics for p in range(self.counts[k]) if p not in taken[k]]
        rest: list[tuple[int, int]] = []
        for k, p in self._same_rack(free):
            i = self.previous.get((k, p), -1)
            if i >= 0 and self.load[i] < self.quota[i]:
                self.give(i, k, p)
            else:
                rest.append((k, p))
        members = iter(range(len(self.quota)))
        i = next(members, -1)
        for k, p in rest:
            while self.load[i] >= self.quota[i]:
                i = next(members)
            self.give(i, k, p)
        return [{self.ids[k]: frozenset(ps) for k, ps in sorted(o.items()) if ps}
                for o in self.out]

    def _same_rack(self, free: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Give free partitions to same-rack members with room; return the others.

        Partitions are grouped by the member racks their replicas sit on; groups with the
        fewest same-rack members go first. A group's partitions (in (topic, partition)
        order) are shared out level by level among those racks' members with room, least
        loaded first, each member taking one contiguous run."""
        racks, load, quota = self.racks, self.load, self.quota
        by_rack: dict[str, list[int]] = {}
        for i, r in enumerate(racks.member_rack):
            if r is not None:
                by_rack.setdefault(r, []).append(i)
        matched: dict[frozenset[str], tuple[str, ...]] = {}
        groups: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        left = []
        for k, p in free:
            replicas = racks.racks_of(k, p)
            rs = matched.get(replicas)
            if rs is None:
                rs = matched[replicas] = tuple(sorted(replicas & racks.member_racks))
            if rs:
                groups.setdefault(rs, []).append((k, p))
            else:
                left.append((k, p))
        for rs in sorted(groups, key=lambda rs: (sum(len(by_rack[r]) for r in rs), rs)):
            parts = groups[rs]
            members = sorted((i for r in rs for i in by_rack[r] if load[i] < quota[i]),
                             key=lambda i: (load[i], i))
            share = dict.fromkeys(members, 0)
            remaining = len(parts)
            while members and remaining:
                still = []
                for i in members:
                    if not remaining:
                        break
                    share[i] += 1
                    remaining -= 1
                    if load[i] + share[i] < quota[i]:
                        still.append(i)
                else:
                    members = still
            pos = 0
            for i, c in share.items():
                if c:
                    self._give_run(i, parts[pos:pos + c])
                    pos += c
            left.extend(parts[pos:])
        left.sort()
        return left

    def _give_run(self, i: int, run: list[tuple[int, int]]) -> None:
        mine = self.out[i]
        for k, grp in itertools.groupby(run, key=operator.itemgetter(0)):
            got = mine.get(k)
            if got is None:
                got = mine[k] = set()
            got.update(p for _, p in grp)
        self.load[i] += len(run)
