"""Offset-range planning: input partitions, ``minPartitions`` splits, rate limiting."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from pyspark.sql.datasource import InputPartition

from samsa import TopicPartition

__all__ = ["OffsetRange", "plan_ranges", "rate_limit"]


class OffsetRange(InputPartition):
    """Records ``start <= offset < until`` of one partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, until: int) -> None:
        super().__init__((topic, partition, start, until))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.until = until

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __len__(self) -> int:
        return self.until - self.start

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}-{self.partition} [{self.start}, {self.until}))"


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                min_partitions: int | None = None) -> list[OffsetRange]:
    """One range per partition with data; split into about ``min_partitions`` tasks.

    As Spark's Kafka source: when there are fewer non-empty ranges than ``min_partitions``,
    each range is cut into ``max(1, round(size / total * min_partitions))`` equal parts.
    """
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], end[tp])
              for tp in sorted(end) if tp in start and end[tp] > start[tp]]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(len(r) for r in ranges)
    out = []
    for r in ranges:
        parts = max(1, round(len(r) / total * min_partitions))
        size = len(r)
        bounds = [r.start + size * i // parts for i in range(parts + 1)]
        out += [OffsetRange(r.topic, r.partition, a, b)
                for a, b in itertools.pairwise(bounds) if b > a]
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_records: int) -> dict[TopicPartition, int]:
    """End offsets admitting at most about ``max_records`` records past ``start``.

    The budget is split across partitions in proportion to their backlog; a share below one
    record is rounded up (no partition starves), larger shares are rounded down (Spark's rule).
    """
    sizes = {tp: max(0, end - start[tp]) for tp, end in latest.items() if tp in start}
    total = sum(sizes.values())
    if total <= max_records:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = max_records * size / total
        n = int(share) if share >= 1 else (1 if share > 0 else 0)
        out[tp] = min(end, start[tp] + n)
    return out
