"""Which ``__consumer_offsets`` partition (coordinator shard) owns a group.

Kafka computes ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` where
``hashCode`` is Java's ``String.hashCode`` (``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code
units with int32 overflow) and ``Utils.abs(Integer.MIN_VALUE)`` is 0.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
_MIN_INT = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` as a signed int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if value == _MIN_INT else abs(value)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that coordinates ``group_id``."""
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
