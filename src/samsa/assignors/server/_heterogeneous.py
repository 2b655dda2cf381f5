"""``uniform`` when members subscribe to different topics.

As in Kafka's heterogeneous builder: balance first, then stickiness. Topics with the same
subscribers form a *group*, handled as one long topic (its topics' partitions laid end to
end): the balance rule is the same for all of them, and a member then takes a contiguous
run that spans few topics instead of one partition of each of many topics (a thousand
members on 50,000 partitions of four subscription shapes: about one topic entry per member
instead of fifty).

1. Every member keeps its current partitions of topics it still subscribes to.
2. Groups in order (most partitions per subscriber first, then fewest subscribers, then
   lowest topic id): the free partitions go to the least loaded subscribers, level by level
   (every member of the lowest level gets one before the level rises). A few more passes
   level each group's share again on what the other groups gave (counts only, until
   nothing changes); then each member takes its share as one contiguous run. With racks
   in play, one pass places partitions one by one and, within a level, prefers a member on
   one of their replica racks.
3. Balancing passes over the groups with two or more subscribers: while a subscriber
   holding one of the group's partitions has at least two more partitions than the least
   loaded subscriber, partitions move between them (half the gap at once; one at a time,
   a same-rack one if there is one, with racks). Passes repeat until one moves nothing;
   every move lowers the sum of squared loads, so this ends.

The result: for every topic, no holder has two more partitions than any subscriber, so
members with the same subscriptions differ by at most one. Assigning again from the result
keeps everything (step 1) and moves nothing (step 3 found nothing to do).

Lists below follow the groups' step-2 order (``g`` is a position in it; a partition's place
in its group is its *position*); members are numbered in member id order.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator

from samsa.assignors.server._common import Held, Inputs, Out, Racks

#: Passes of step 2 at most (the first, then levelling each group again on the others).
_SWEEPS = 4


class _Builder:
    def __init__(self, inputs: Inputs, held: list[Held], racks: Racks) -> None:
        self.racks = racks
        self.ids = inputs.topics.ids
        self.held = held
        counts = inputs.counts
        n = len(inputs.members)
        # Members with the same subscriptions form a class; topics with the same classes
        # form a group. Per-class load bounds let a balancing pass skip a group without
        # looking at its partitions.
        classes: dict[frozenset[int], list[int]] = {}
        for i, subs in enumerate(inputs.subscribed):
            classes.setdefault(subs, []).append(i)
        self.classes = list(classes.values())
        topic_classes: list[list[int]] = [[] for _ in counts]
        for c, subs in enumerate(classes):
            for k in subs:
                topic_classes[k].append(c)
        by_classes: dict[tuple[int, ...], list[int]] = {}
        for k, cs in enumerate(topic_classes):
            if counts[k]:
                by_classes.setdefault(tuple(cs), []).append(k)

        def subscribers(cs: tuple[int, ...]) -> list[int]:
            return sorted(i for c in cs for i in self.classes[c])

        keyed = [(cs, ks, subscribers(cs)) for cs, ks in by_classes.items()]
        keyed.sort(key=lambda e: (-sum(counts[k] for k in e[1]) / len(e[2]), len(e[2]), e[1][0]))
        #: Per group: its topics (ascending), where each starts (and the end), subscribers
        #: (by member number), classes, and each position's owner (-1: free).
        self.topics = [ks for _, ks, _ in keyed]
        self.offsets = [list(itertools.accumulate((counts[k] for k in ks), initial=0))
                        for ks in self.topics]
        self.subscribers = [subs for _, _, subs in keyed]
        self.group_classes = [list(cs) for cs, _, _ in keyed]
        self.owner = [[-1] * offs[-1] for offs in self.offsets]
        self.free = [offs[-1] for offs in self.offsets]
        self.touched = [False] * len(keyed)
        where = {k: (g, offs[j]) for g, (ks, offs) in enumerate(zip(self.topics, self.offsets,
                                                                  strict=True))
                 for j, k in enumerate(ks)}
        self.load = [h.size for h in held]
        self.changed = [False] * n
        for i, h in enumerate(held):
            for k, ps in h.parts:
                g, base = where[k]
                arr = self.owner[g]
                lo, hi = min(ps), max(ps)
                if hi - lo + 1 == len(ps):
                    arr[base + lo:base + hi + 1] = [i] * len(ps)
                else:
                    for p in ps:
                        arr[base + p] = i
                self.free[g] -= len(ps)

    def run(self) -> list[Out]:
        free: dict[int, list[int]] = {}
        for g, arr in enumerate(self.owner):
            nfree = self.free[g]
            if not nfree:
                continue
            self.touched[g] = True
            if nfree == len(arr):
                free[g] = list(range(nfree))
            elif nfree * 16 < len(arr):  # a few: found by C-level scans
                found = free[g] = []
                p = -1
                for _ in range(nfree):
                    p = arr.index(-1, p + 1)
                    found.append(p)
            else:
                free[g] = [p for p, o in enumerate(arr) if o < 0]
        if self.racks.active:
            for g, ps in free.items():
                self._fill_racks(g, ps)
        else:
            for g, shares in self._shares(free).items():
                self._fill(g, free[g], shares)
        self._balance()
        return self._result()

    def _shares(self, free: dict[int, list[int]]) -> dict[int, list[tuple[int, int]]]:
        """How many free partitions of each group each subscriber gets (step 2).

        One pass in group order, then up to ``_SWEEPS - 1`` more in which each group's
        shares are levelled again on the others' current shares: a group filled early cannot
        know what later groups will give its subscribers, and levelling again in bulk costs
        far less than the balancing moves it saves.
        """
        load = self.load
        shares: dict[int, list[tuple[int, int]]] = {}
        for _ in range(_SWEEPS):
            again = False
            for g, ps in free.items():
                old = shares.get(g)
                if old is not None:
                    for i, c in old:
                        load[i] -= c
                new = self._levels(g, len(ps))
                for i, c in new:
                    load[i] += c
                if new != old:
                    shares[g] = new
                    again = True
            if not again:
                break
        return shares

    def _result(self) -> list[Out]:
        """Members whose partitions did not change keep their entry as it was; the others
        get their runs of the touched groups plus what they hold in the other groups."""
        ids, changed = self.ids, self.changed
        untouched = {k for g, ks in enumerate(self.topics) if not self.touched[g] for k in ks}
        out: list[Out] = [{ids[k]: ps for k, ps in h.parts if k in untouched} if changed[i]
                          else h.out(ids) for i, h in enumerate(self.held)]
        for g, arr in enumerate(self.owner):
            if not self.touched[g]:
                continue
            offs = self.offsets[g]
            ends = _run_ends(arr)
            e = 0
            for j, k in enumerate(self.topics[g]):
                # A member's runs of one topic merge by member number (an int); then one
                # insertion per member with the topic id (hashing a UUID is Python code).
                runs: dict[int, frozenset[int]] = {}
                lo, hi = offs[j], offs[j + 1]
                start = lo
                while start < hi:
                    while ends[e] <= start:
                        e += 1
                    end = min(ends[e], hi)
                    o = arr[start]
                    if changed[o]:
                        ps = frozenset(range(start - lo, end - lo))
                        old = runs.get(o)
                        runs[o] = ps if old is None else old | ps
                    start = end
                t = ids[k]
                for o, ps in runs.items():
                    out[o][t] = ps
        return out

    def _levels(self, g: int, free: int) -> list[tuple[int, int]]:
        """How many of ``free`` partitions the subscribers of group ``g`` get, level by
        level: (member, count) for those that get some, lowest level first."""
        order = sorted(self.subscribers[g], key=self.load.__getitem__)  # stable: (load, id)
        loads = list(map(self.load.__getitem__, order))
        level = loads[0]
        end = 0
        while free > 0:
            end = bisect.bisect_right(loads, level, end)
            nxt = loads[end] if end < len(loads) else level + free
            rounds = min(nxt - level, free // end)
            if rounds == 0:
                break
            level += rounds
            free -= rounds * end
        # Members below ``level`` are raised to it; the first ``free`` get one more.
        below = bisect.bisect_left(loads, level, 0, end)
        return [(order[j], level - loads[j] + (1 if j < free else 0))
                for j in range(max(below, free))]

    def _fill(self, g: int, free: list[int], shares: list[tuple[int, int]]) -> None:
        """Give each member its share of the free positions, in contiguous runs (loads
        already count them)."""
        arr = self.owner[g]
        pos = 0
        for i, c in shares:
            first, last = free[pos], free[pos + c - 1]
            if last - first == c - 1:
                arr[first:last + 1] = [i] * c
            else:
                for p in free[pos:pos + c]:
                    arr[p] = i
            pos += c
            self.changed[i] = True

    def _tp(self, g: int, position: int) -> tuple[int, int]:
        """(topic number, partition) at ``position`` of group ``g``."""
        offs = self.offsets[g]
        j = bisect.bisect_right(offs, position) - 1
        return self.topics[g][j], position - offs[j]

    def _fill_racks(self, g: int, free: list[int]) -> None:
        load, arr = self.load, self.owner[g]
        order = sorted(self.subscribers[g], key=load.__getitem__)
        level = load[order[0]]
        end = 0
        pos = 0
        while pos < len(free):
            while end < len(order) and load[order[end]] <= level:
                end += 1
            pool = order[:end]
            batch = free[pos:pos + len(pool)]
            pos += len(batch)
            for p, i in self._rack_pairs(g, batch, pool):
                arr[p] = i
                load[i] += 1
                self.changed[i] = True
            level += 1

    def _rack_pairs(self, g: int, batch: list[int], pool: list[int]) -> list[tuple[int, int]]:
        """Pair partitions with distinct pool members, same rack first."""
        racks = self.racks
        by_rack: dict[str, list[int]] = {}
        for i in reversed(pool):
            r = racks.member_rack[i]
            if r is not None:
                by_rack.setdefault(r, []).append(i)
        used: set[int] = set()
        pairs = []
        unmatched = []
        for p in batch:
            chosen = -1
            for r in sorted(racks.racks_of(*self._tp(g, p))):
                stack = by_rack.get(r)
                while stack and stack[-1] in used:
                    stack.pop()
                if stack:
                    chosen = stack.pop()
                    break
            if chosen < 0:
                unmatched.append(p)
            else:
                used.add(chosen)
                pairs.append((p, chosen))
        rest = (i for i in pool if i not in used)
        pairs.extend(zip(unmatched, rest, strict=False))
        return pairs

    def _bounds(self) -> tuple[list[int], list[int]]:
        load = self.load
        return ([min(load[i] for i in ms) for ms in self.classes],
                [max(load[i] for i in ms) for ms in self.classes])

    def _balance(self) -> None:
        groups = [g for g, subs in enumerate(self.subscribers) if len(subs) >= 2]
        moved = True
        while moved:
            moved = False
            lo, hi = self._bounds()
            for g in groups:
                cs = self.group_classes[g]
                if max(hi[c] for c in cs) - min(lo[c] for c in cs) < 2:
                    continue
                if self._balance_group(g):
                    moved = True
                    lo, hi = self._bounds()

    def _balance_group(self, g: int) -> bool:
        load, arr = self.load, self.owner[g]
        held: dict[int, list[int]] = {}
        start = 0
        for end in _run_ends(arr):
            held.setdefault(arr[start], []).extend(range(start, end))
            start = end
        version = dict.fromkeys(self.subscribers[g], 0)
        low = [(load[i], i, 0) for i in self.subscribers[g]]
        high = [(-load[i], i, 0) for i in held]
        heapq.heapify(low)
        heapq.heapify(high)
        moved = False
        while low and high:
            if low[0][2] != version[low[0][1]]:
                heapq.heappop(low)
                continue
            if high[0][2] != version[high[0][1]]:
                heapq.heappop(high)
                continue
            r, d = low[0][1], high[0][1]
            gap = load[d] - load[r]
            if gap < 2:
                break
            parts = held[d]
            if self.racks.active:
                moving = [self._pick(g, parts, d, r)]
            else:
                moving = parts[-min(len(parts), gap // 2):]
                del parts[-len(moving):]
            for p in moving:
                arr[p] = r
            held.setdefault(r, []).extend(moving)
            load[d] -= len(moving)
            load[r] += len(moving)
            self.changed[d] = self.changed[r] = self.touched[g] = moved = True
            for i in (d, r):
                version[i] += 1
                heapq.heappush(low, (load[i], i, version[i]))
                if held[i]:
                    heapq.heappush(high, (-load[i], i, version[i]))
        return moved

    def _pick(self, g: int, parts: list[int], donor: int, receiver: int) -> int:
        """The partition to move: one on the receiver's rack, else one on the wrong rack
        for the donor, else the last."""
        racks = self.racks
        for j in range(len(parts) - 1, -1, -1):
            if racks.matches(receiver, *self._tp(g, parts[j])):
                return parts.pop(j)
        for j in range(len(parts) - 1, -1, -1):
            if not racks.matches(donor, *self._tp(g, parts[j])):
                return parts.pop(j)
        return parts.pop()

def _run_ends(arr: list[int]) -> list[int]:
    """Where each run of equal owners in ``arr`` ends (exclusive), found in C, not per
    position."""
    ends = list(itertools.compress(range(1, len(arr)),
                                   map(operator.ne, arr, itertools.islice(arr, 1, None))))
    ends.append(len(arr))
    return ends


def assign_heterogeneous(inputs: Inputs, held: list[Held], racks: Racks) -> list[Out]:
    return _Builder(inputs, held, racks).run()
