"""``uniform`` when members subscribe to different topics.

As in Kafka's heterogeneous builder: balance first, then stickiness, topic by topic.

1. Every member keeps its current partitions of topics it still subscribes to.
2. Topics in order (most partitions per subscriber first, then fewest subscribers, then id):
   the free partitions go to the least loaded subscribers, level by level (every member of
   the lowest level gets one before the level rises), in contiguous runs. With racks in
   play, partitions are placed one by one and, within a level, prefer a member on one of
   their replica racks.
3. Balancing passes over the topics with two or more subscribers: while a subscriber holding
   one of the topic's partitions has at least two more partitions than the least loaded
   subscriber, one partition moves between them (a same-rack one if there is one). Passes
   repeat until one moves nothing; every move lowers the sum of squared loads, so this ends.

The result: for every topic, no holder has two more partitions than any subscriber, so
members with the same subscriptions differ by at most one. Assigning again from the result
keeps everything (step 1) and moves nothing (step 3 found nothing to do).

Lists below follow the topics' step-2 order (``k`` is a position in it); members are
numbered in member id order.
"""

from __future__ import annotations

import bisect
import heapq
import itertools

from samsa.assignors.server._common import Held, Inputs, Out, Racks, subscribers_by_topic


class _Builder:
    def __init__(self, inputs: Inputs, held: list[Held], racks: Racks) -> None:
        self.racks = racks
        self.ids = inputs.topics.ids
        self.held = held
        counts = inputs.counts
        n = len(inputs.members)
        by_topic = subscribers_by_topic(inputs.subscribed, list(range(n)), len(counts))
        #: Topic numbers in step-2 order; the lists below follow this order.
        self.topics = sorted(
            range(len(counts)),
            key=lambda k: (-counts[k] / len(by_topic[k]), len(by_topic[k]), k),
        )
        position = {k: j for j, k in enumerate(self.topics)}
        self.subscribers = [by_topic[k] for k in self.topics]
        self.owner = [[-1] * counts[k] for k in self.topics]
        self.load = [h.size for h in held]
        self.changed = [False] * n
        for i, h in enumerate(held):
            for k, ps in h.parts:
                arr = self.owner[position[k]]
                for p in ps:
                    arr[p] = i
        # Members with the same subscriptions form a class; per-class load bounds let a
        # balancing pass skip a topic without looking at its partitions.
        classes: dict[frozenset[int], list[int]] = {}
        for i, subs in enumerate(inputs.subscribed):
            classes.setdefault(subs, []).append(i)
        self.classes = list(classes.values())
        self.topic_classes: list[list[int]] = [[] for _ in self.topics]
        for c, subs in enumerate(classes):
            for k in subs:
                self.topic_classes[position[k]].append(c)

    def run(self) -> list[Out]:
        for j, arr in enumerate(self.owner):
            if -1 in arr:
                free = [p for p, o in enumerate(arr) if o < 0]
                if self.racks.active:
                    self._fill_racks(j, free)
                else:
                    self._fill(j, free)
        self._balance()
        # Members whose partitions did not change keep their entry as it was.
        out: list[Out] = [{} if c else h.out(self.ids)
                          for c, h in zip(self.changed, self.held, strict=True)]
        changed = self.changed
        for k, arr in zip(self.topics, self.owner, strict=True):
            t = self.ids[k]
            # Owners mostly hold runs of partitions: group runs, merge a member's runs (keyed
            # by member number), then one insertion per member.
            runs: dict[int, frozenset[int]] = {}
            for o, run in itertools.groupby(range(len(arr)), arr.__getitem__):
                if changed[o]:
                    ps = frozenset(run)
                    old = runs.get(o)
                    runs[o] = ps if old is None else old | ps
            for o, ps in runs.items():
                out[o][t] = ps
        return out

    def _levels(self, k: int, free: int) -> list[tuple[int, int]]:
        """How many of ``free`` partitions the subscribers of topic ``k`` get, level by
        level: (member, count) for those that get some, lowest level first."""
        order = sorted(self.subscribers[k], key=self.load.__getitem__)  # stable: (load, id)
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

    def _fill(self, k: int, free: list[int]) -> None:
        arr, load = self.owner[k], self.load
        pos = 0
        for i, c in self._levels(k, len(free)):
            first, last = free[pos], free[pos + c - 1]
            if last - first == c - 1:
                arr[first:last + 1] = [i] * c
            else:
                for p in free[pos:pos + c]:
                    arr[p] = i
            pos += c
            load[i] += c
            self.changed[i] = True

    def _fill_racks(self, k: int, free: list[int]) -> None:
        load, arr = self.load, self.owner[k]
        order = sorted(self.subscribers[k], key=load.__getitem__)
        level = load[order[0]]
        end = 0
        pos = 0
        while pos < len(free):
            while end < len(order) and load[order[end]] <= level:
                end += 1
            pool = order[:end]
            batch = free[pos:pos + len(pool)]
            pos += len(batch)
            for p, i in self._rack_pairs(k, batch, pool):
                arr[p] = i
                load[i] += 1
                self.changed[i] = True
            level += 1

    def _rack_pairs(self, k: int, batch: list[int], pool: list[int]) -> list[tuple[int, int]]:
        """Pair partitions with distinct pool members, same rack first."""
        racks, t = self.racks, self.topics[k]  # t: the topic's number
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
            for r in sorted(racks.racks_of(t, p)):
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
        topics = [k for k, subs in enumerate(self.subscribers) if len(subs) >= 2]
        moved = True
        while moved:
            moved = False
            lo, hi = self._bounds()
            for k in topics:
                ks = self.topic_classes[k]
                if max(hi[c] for c in ks) - min(lo[c] for c in ks) < 2:
                    continue
                if self._balance_topic(k):
                    moved = True
                    lo, hi = self._bounds()

    def _balance_topic(self, k: int) -> bool:
        load, arr = self.load, self.owner[k]
        held: dict[int, list[int]] = {}
        for p, o in enumerate(arr):
            held.setdefault(o, []).append(p)
        version = dict.fromkeys(self.subscribers[k], 0)
        low = [(load[i], i, 0) for i in self.subscribers[k]]
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
            if load[d] - load[r] < 2:
                break
            parts = held[d]
            p = self._pick(k, parts, d, r) if self.racks.active else parts.pop()
            arr[p] = r
            held.setdefault(r, []).append(p)
            load[d] -= 1
            load[r] += 1
            self.changed[d] = self.changed[r] = moved = True
            for i in (d, r):
                version[i] += 1
                heapq.heappush(low, (load[i], i, version[i]))
                if held[i]:
                    heapq.heappush(high, (-load[i], i, version[i]))
        return moved

    def _pick(self, k: int, parts: list[int], donor: int, receiver: int) -> int:
        """The partition to move: one on the receiver's rack, else one on the wrong rack
        for the donor, else the last."""
        racks, t = self.racks, self.topics[k]  # t: the topic's number
        for j in range(len(parts) - 1, -1, -1):
            if racks.matches(receiver, t, parts[j]):
                return parts.pop(j)
        for j in range(len(parts) - 1, -1, -1):
            if not racks.matches(donor, t, parts[j]):
                return parts.pop(j)
        return parts.pop()


def assign_heterogeneous(inputs: Inputs, held: list[Held], racks: Racks) -> list[Out]:
    return _Builder(inputs, held, racks).run()
