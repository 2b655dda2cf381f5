"""When rack-aware assignors use racks: Kafka's rule (KIP-881, ``useRackAwareAssignment``).

Racks are used only when some member's rack holds a replica and the partitions do not all
have replicas on the same racks. Otherwise the result is exactly the plain strategy's.
"""

from __future__ import annotations

import pytest

from samsa import TopicPartition
from samsa.assignors import plan

STRATEGIES = ["range", "sticky", "cooperative-sticky", "optimal"]


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("member_racks", "replica_racks"),
    [
        # One rack holds every replica (a one-broker cluster): members elsewhere change nothing.
        ({"A": "b", "B": "a"}, [["a"]] * 4),
        # Every partition on the same two racks: locality is the same for every partition.
        ({"A": "c", "B": "a"}, [["a", "b"]] * 4),
        # No member rack holds any replica.
        ({"A": "x", "B": "y"}, [["a"], ["b"], ["a"], ["b"]]),
    ],
)
def test_racks_unused_when_kafka_would_not_use_them(
    strategy: str, member_racks: dict[str, str], replica_racks: list[list[str]]
) -> None:
    counts = {"t": 4}
    subs = {"A": ["t"], "B": ["t"]}
    plain = plan(strategy, counts, subs)
    aware = plan(strategy, counts, subs, racks=member_racks,
                 partition_racks={"t": replica_racks})
    assert aware == plain


def test_range_single_rack_cluster_keeps_range_order() -> None:
    """Kafka's RangeAssignor: the first member (rack b) keeps the first range, not rack a's."""
    got = plan("range", {"t": 4}, {"A": ["t"], "B": ["t"]}, racks={"A": "b", "B": "a"},
               partition_racks={"t": [["a"]] * 4})
    assert got == {"A": tps("t", 0, 1), "B": tps("t", 2, 3)}


def test_range_decides_per_topic() -> None:
    """RangeAssignor applies the rule per topic: only the topic with mixed racks is matched."""
    counts = {"mixed": 2, "single": 3}
    subs = {"A": ["mixed", "single"], "B": ["mixed", "single"]}
    got = plan("range", counts, subs, racks={"A": "b", "B": "a"},
               partition_racks={"mixed": [["a"], ["b"]], "single": [["a"]] * 3})
    assert got == {"A": tps("mixed", 1) + tps("single", 0, 1),
                   "B": tps("mixed", 0) + tps("single", 2)}


def test_range_extra_partition_goes_to_the_rack_match() -> None:
    """Quotas are per + 1 for the first n % c members to reach them, not fixed by order."""
    got = plan("range", {"t": 3}, {"A": ["t"], "B": ["t"]}, racks={"A": "b", "B": "a"},
               partition_racks={"t": [["a"], ["a"], ["b"]]})
    assert got == {"A": tps("t", 2), "B": tps("t", 0, 1)}


def test_range_keeps_co_partitioning_with_racks() -> None:
    """Topics with the same members and partition count go partition by partition: partition
    p of both topics to one member on a rack of both, even if one topic alone needs no racks."""
    counts = {"mixed": 2, "single": 2}
    subs = {"A": ["mixed", "single"], "B": ["mixed", "single"]}
    got = plan("range", counts, subs, racks={"A": "b", "B": "a"},
               partition_racks={"mixed": [["a"], ["b"]], "single": [["a"], ["a"]]})
    assert got == {"A": tps("mixed", 1) + tps("single", 1),
                   "B": tps("mixed", 0) + tps("single", 0)}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_racks_used_when_partitions_differ(strategy: str) -> None:
    got = plan(strategy, {"t": 4}, {"A": ["t"], "B": ["t"]}, racks={"A": "b", "B": "a"},
               partition_racks={"t": [["a"], ["a"], ["b"], ["b"]]})
    assert got == {"A": tps("t", 2, 3), "B": tps("t", 0, 1)}
