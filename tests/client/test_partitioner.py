"""murmur2 key partitioning (Java / librdkafka compatible) and sticky null-key partitioning."""

from __future__ import annotations

from samsa.client.partitioner import StickyPartitioner, murmur2, partition_for_key


def _signed(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def test_murmur2_matches_java_vectors() -> None:
    # Apache Kafka UtilsTest.testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, expected in cases.items():
        assert _signed(murmur2(key)) == expected, key


def test_partition_is_positive_hash_modulo() -> None:
    for key in (b"", b"a", b"user-1", bytes(range(200))):
        assert partition_for_key(key, 7) == (murmur2(key) & 0x7FFFFFFF) % 7


def test_sticky_partition_changes_only_when_batch_done() -> None:
    s = StickyPartitioner()
    p = s.partition("t", 5)
    assert all(s.partition("t", 5) == p for _ in range(20))
    s.batch_done("t", p, 5)
    assert s.partition("t", 5) != p
