"""Kafka's default partitioner: murmur2 for keys (Java-compatible), sticky for null keys."""

from __future__ import annotations

import random
import struct

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java ``Utils.murmur2`` (seed 0x9747b28c) as an unsigned 32-bit value."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length // 4
    for (k,) in struct.iter_unpack("<I", data[: n4 * 4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    i = n4 * 4
    if rest == 3:
        h ^= data[i + 2] << 16
    if rest >= 2:
        h ^= data[i + 1] << 8
    if rest >= 1:
        h ^= data[i]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """``toPositive(murmur2(key)) % num_partitions``, as Java and librdkafka's murmur2."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Null keys stick to one random partition until its batch is sent (KIP-480)."""

    def __init__(self) -> None:
        self.current: dict[str, int] = {}
        """topic -> its sticky partition (read it directly on a hot path; may be stale)."""

    def partition(self, topic: str, num_partitions: int) -> int:
        p = self.current.get(topic)
        if p is None or p >= num_partitions:
            p = random.randrange(num_partitions)
            self.current[topic] = p
        return p

    def batch_done(self, topic: str, partition: int, num_partitions: int) -> None:
        """The sticky partition's batch filled up: pick another partition."""
        if self.current.get(topic) != partition:
            return
        if num_partitions <= 1:
            return
        choice = random.randrange(num_partitions - 1)
        self.current[topic] = choice if choice < partition else choice + 1
