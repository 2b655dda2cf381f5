"""``uniform`` when members subscribe to different topics.

As in Kafka's heterogeneous builder: balance first, then stickiness, topic by topic.

1. Every member keeps its current partitions of topics it still subscribes to.
2. Topics in order (most partitions per subscriber first, then fewest subscribers, then id):
   each free partition goes to the least loaded subscriber, level by level (every member of
   the lowest level gets one before the level rises). With racks in play, within a level a
   partition prefers a member on one of its replica racks.
3. Balancing passes over the topics with two or more subscribers: while a subscriber holding
   one of the topic's partitions has at least two more partitions than the least loaded
   subscriber, one partition moves between them (a same-rack one if there is one). Passes
   repeat until one moves nothing; every move lowers the sum of squared loads, so this ends.

The result: for every topic, no holder has two more partitions than any subscriber, so
members with the same subscriptions differ by at most one. Assigning again from the result
keeps everything (step 1) and moves nothing (step 3 found nothing to do).
"""

from __future__ import annotations

import heapq
import uuid

from samsa.assignors.server._common import Inputs, Owned, Racks

Result = list[dict[uuid.UUID, frozenset[int]]]


class _Builder:
    def __init__(self, inputs: Inputs, current: list[Owned], racks: Racks) -> None:
        self.racks = racks
        self.counts = inputs.counts
        n = len(inputs.members)
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for i, subs in enumerate(inputs.subscribed):
            for t in subs:
                self.subscribers.setdefault(t, []).append(i)
        self.owner = {t: [-1] * c for t, c in self.counts.items()}
        self.load = [0] * n
        for i, owned in enumerate(current):
            for t, ps in owned.items():
                arr = self.owner[t]
                for p in ps:
                    arr[p] = i
                self.load[i] += len(ps)
        self.order = sorted(
            self.counts,
            key=lambda t: (-self.counts[t] / len(self.subscribers[t]),
                           len(self.subscribers[t]), t.int),
        )
        # Members with the same subscriptions form a class; per-class load bounds let a
        # balancing pass skip a topic without looking at its partitions.
        classes: dict[frozenset[uuid.UUID], list[int]] = {}
        for i, subs in enumerate(inputs.subscribed):
            classes.setdefault(subs, []).append(i)
        self.classes = list(classes.values())
        class_of = {s: k for k, s in enumerate(classes)}
        self.topic_classes: dict[uuid.UUID, list[int]] = {t: [] for t in self.counts}
        for s, k in class_of.items():
            for t in s:
                self.topic_classes[t].append(k)

    def run(self) -> Result:
        for t in self.order:
            free = [p for p, o in enumerate(self.owner[t]) if o < 0]
            if free:
                self._fill(t, free)
        self._balance()
        out: list[dict[uuid.UUID, list[int]]] = [{} for _ in self.load]
        for t, arr in self.owner.items():
            for p, o in enumerate(arr):
                out[o].setdefault(t, []).append(p)
        return [{t: frozenset(ps) for t, ps in o.items()} for o in out]

    def _fill(self, t: uuid.UUID, free: list[int]) -> None:
        load, arr, racks = self.load, self.owner[t], self.racks
        order = sorted(self.subscribers[t], key=lambda i: (load[i], i))
        level = load[order[0]]
        end = 0
        k = 0
        while k < len(free):
            while end < len(order) and load[order[end]] <= level:
                end += 1
            pool = order[:end]
            batch = free[k:k + len(pool)]
            k += len(batch)
            if racks.active:
                pairs = self._rack_pairs(t, batch, pool)
            else:
                pairs = list(zip(batch, pool, strict=False))
            for p, i in pairs:
                arr[p] = i
                load[i] += 1
            level += 1

    def _rack_pairs(self, t: uuid.UUID, batch: list[int], pool: list[int]
                    ) -> list[tuple[int, int]]:
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

    def _balance(self) -> None:
        topics = [t for t in self.order if len(self.subscribers[t]) >= 2]
        moved = True
        while moved:
            moved = False
            lo = [min(self.load[i] for i in ms) for ms in self.classes]
            hi = [max(self.load[i] for i in ms) for ms in self.classes]
            for t in topics:
                ks = self.topic_classes[t]
                if max(hi[k] for k in ks) - min(lo[k] for k in ks) < 2:
                    continue
                if self._balance_topic(t):
                    moved = True
                    lo = [min(self.load[i] for i in ms) for ms in self.classes]
                    hi = [max(self.load[i] for i in ms) for ms in self.classes]

    def _balance_topic(self, t: uuid.UUID) -> bool:
        load, arr, racks = self.load, self.owner[t], self.racks
        held: dict[int, list[int]] = {}
        for p, o in enumerate(arr):
            held.setdefault(o, []).append(p)
        version = {i: 0 for i in self.subscribers[t]}
        low = [(load[i], i, 0) for i in self.subscribers[t]]
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
            p = self._pick(t, parts, d, r) if racks.active else parts.pop()
            arr[p] = r
            held.setdefault(r, []).append(p)
            load[d] -= 1
            load[r] += 1
            moved = True
            for i in (d, r):
                version[i] += 1
                heapq.heappush(low, (load[i], i, version[i]))
                if held[i]:
                    heapq.heappush(high, (-load[i], i, version[i]))
        return moved

    def _pick(self, t: uuid.UUID, parts: list[int], donor: int, receiver: int) -> int:
        """The partition to move: one on the receiver's rack, else one on the wrong rack
        for the donor, else the last."""
        racks = self.racks
        for k in range(len(parts) - 1, -1, -1):
            if racks.matches(receiver, t, parts[k]):
                return parts.pop(k)
        for k in range(len(parts) - 1, -1, -1):
            if not racks.matches(donor, t, parts[k]):
                return parts.pop(k)
        return parts.pop()


def assign_heterogeneous(inputs: Inputs, current: list[Owned], racks: Racks) -> Result:
    return _Builder(inputs, current, racks).run()
