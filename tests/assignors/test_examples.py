"""The worked examples of the assignor design document, exactly, plus interface behaviour."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

import samsa
from samsa.assignors import (
    Assignment,
    Assignor,
    ClusterView,
    CooperativeStickyAssignor,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    StickyAssignor,
    Subscription,
    TopicPartition,
    assignor_names,
    plan,
    resolve_assignor,
)


def tps(spec: str) -> list[TopicPartition]:
    """'t0p0 t1p2' -> sorted TopicPartitions."""
    out = []
    for item in spec.split():
        topic, _, p = item.partition("p")
        out.append(TopicPartition(topic, int(p)))
    return sorted(out)


TWO_TOPICS = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
HETERO_SUBS = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
HETERO_COUNTS = {"t0": 1, "t1": 2, "t2": 3}


def test_topic_partition_is_the_package_type() -> None:
    assert TopicPartition is samsa.TopicPartition


def test_range_four_partitions() -> None:
    assert plan("range", {"t0": 4, "t1": 4}, TWO_TOPICS) == {
        "C0": tps("t0p0 t0p1 t1p0 t1p1"),
        "C1": tps("t0p2 t0p3 t1p2 t1p3"),
    }


def test_range_three_partitions() -> None:
    assert plan("range", {"t0": 3, "t1": 3}, TWO_TOPICS) == {
        "C0": tps("t0p0 t0p1 t1p0 t1p1"),
        "C1": tps("t0p2 t1p2"),
    }


def test_roundrobin_three_partitions() -> None:
    assert plan("roundrobin", {"t0": 3, "t1": 3}, TWO_TOPICS) == {
        "C0": tps("t0p0 t0p2 t1p1"),
        "C1": tps("t0p1 t1p0 t1p2"),
    }


def test_roundrobin_heterogeneous() -> None:
    assert plan("roundrobin", HETERO_COUNTS, HETERO_SUBS) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1 t2p0 t2p1 t2p2"),
    }


def test_roundrobin_after_c0_leaves() -> None:
    subs = {"C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    assert plan("roundrobin", HETERO_COUNTS, subs) == {
        "C1": tps("t0p0 t1p1"),
        "C2": tps("t1p0 t2p0 t2p1 t2p2"),
    }


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky", "optimal"])
def test_sticky_heterogeneous_and_c0_leaves(strategy: str) -> None:
    first = plan(strategy, HETERO_COUNTS, HETERO_SUBS)
    assert first == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0 t1p1"),
        "C2": tps("t2p0 t2p1 t2p2"),
    }
    subs = {m: t for m, t in HETERO_SUBS.items() if m != "C0"}
    owned = {m: first[m] for m in subs}
    assert plan(strategy, HETERO_COUNTS, subs, owned=owned) == {
        "C1": tps("t0p0 t1p0 t1p1"),
        "C2": tps("t2p0 t2p1 t2p2"),
    }


FOUR_TOPICS = {f"t{i}": 2 for i in range(4)}
THREE_ON_FOUR_TOPICS = {c: list(FOUR_TOPICS) for c in ("C0", "C1", "C2")}
FIRST_OF_THREE = {
    "C0": tps("t0p0 t1p1 t3p0"),
    "C1": tps("t0p1 t2p0 t3p1"),
    "C2": tps("t1p0 t2p1"),
}
"""The document's first assignment of the sticky example, which it notes is also
RoundRobin's (Kafka's constrained sticky path deals round-robin too)."""


def test_roundrobin_four_topics_then_c1_leaves() -> None:
    assert plan("roundrobin", FOUR_TOPICS, THREE_ON_FOUR_TOPICS) == FIRST_OF_THREE
    subs = {m: t for m, t in THREE_ON_FOUR_TOPICS.items() if m != "C1"}
    # RoundRobin deals again from scratch, keeping only what falls where it was.
    assert plan("roundrobin", FOUR_TOPICS, subs, owned={m: FIRST_OF_THREE[m] for m in subs}) == {
        "C0": tps("t0p0 t1p0 t2p0 t3p0"),
        "C2": tps("t0p1 t1p1 t2p1 t3p1"),
    }


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky"])
def test_sticky_four_topics_then_c1_leaves(strategy: str) -> None:
    first = plan(strategy, FOUR_TOPICS, THREE_ON_FOUR_TOPICS)
    assert first == FIRST_OF_THREE
    subs = {m: t for m, t in THREE_ON_FOUR_TOPICS.items() if m != "C1"}
    second = plan(strategy, FOUR_TOPICS, subs, owned={m: first[m] for m in subs})
    # Every owned partition stays and C1's three are shared out. The document gives
    # C0 t2p0 and C2 t0p1 t3p1 (the 0.11 algorithm); Kafka since 2.8 (KAFKA-9987,
    # AbstractStickyAssignor.constrainedAssign) deals the unassigned partitions, sorted,
    # round-robin to the members under quota, sorted: C0 t0p1, C2 t2p0, C2 t3p1.
    assert second == {
        "C0": tps("t0p0 t0p1 t1p1 t3p0"),
        "C2": tps("t1p0 t2p0 t2p1 t3p1"),
    }


SEVEN = {"t": 7}


def members(n: int) -> dict[str, list[str]]:
    return {f"C{i}": ["t"] for i in range(n)}


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky",
                                      "optimal"])
def test_eight_consumers_on_seven_partitions(strategy: str) -> None:
    """The document's figure: one partition each for C0..C6, nothing for C7."""
    expected = {f"C{i}": [TopicPartition("t", i)] for i in range(7)} | {"C7": []}
    assert plan(strategy, SEVEN, members(8)) == expected


def test_range_from_one_consumer_to_three_on_seven_partitions() -> None:
    """The document's figures (1)-(3) with the default RangeAssignor: the first
    ``7 % n`` consumers get one partition more."""
    assert plan("range", SEVEN, members(1)) == {"C0": tps(" ".join(f"tp{p}" for p in range(7)))}
    assert plan("range", SEVEN, members(2)) == {"C0": tps("tp0 tp1 tp2 tp3"),
                                                "C1": tps("tp4 tp5 tp6")}
    assert plan("range", SEVEN, members(3)) == {"C0": tps("tp0 tp1 tp2"), "C1": tps("tp3 tp4"),
                                                "C2": tps("tp5 tp6")}


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky"])
def test_an_eighth_consumer_takes_nothing_and_moves_nothing(strategy: str) -> None:
    before = plan(strategy, SEVEN, members(7))
    after = plan(strategy, SEVEN, members(8), owned=before)
    assert after == before | {"C7": []}


def test_static_members_ordered_by_instance_id() -> None:
    cluster = ClusterView({"t": 3})
    subs = {
        "a-member": Subscription(("t",), group_instance_id="z"),
        "b-member": Subscription(("t",), group_instance_id="y"),
        "c-member": Subscription(("t",)),
    }
    for assignor in (RangeAssignor(), resolve_assignor("roundrobin")):
        result = assignor.assign(cluster, subs)
        # static members come first, by instance id: b (y), a (z), then dynamic c.
        assert result["b-member"].partitions[0] == TopicPartition("t", 0)
        assert result["a-member"].partitions[0] == TopicPartition("t", 1)
        assert result["c-member"].partitions[0] == TopicPartition("t", 2)


def test_unknown_topics_and_members_without_topics() -> None:
    result = plan("range", {"t0": 2}, {"A": ["t0", "missing"], "B": []})
    assert result == {"A": tps("t0p0 t0p1"), "B": []}


def test_registry_and_resolve() -> None:
    assert {"range", "roundrobin", "sticky", "cooperative-sticky", "optimal"} <= set(
        assignor_names()
    )
    assert isinstance(resolve_assignor("org.apache.kafka.clients.consumer.RangeAssignor"),
                      RangeAssignor)
    instance = StickyAssignor()
    assert resolve_assignor(instance) is instance
    assert isinstance(resolve_assignor(CooperativeStickyAssignor), CooperativeStickyAssignor)
    assert resolve_assignor("cooperative-sticky").cooperative
    assert not resolve_assignor("sticky").cooperative
    assert RebalanceProtocol.EAGER in CooperativeStickyAssignor.supported_protocols
    with pytest.raises(ValueError):
        resolve_assignor("no-such-strategy")
    with pytest.raises(TypeError):
        resolve_assignor(42)  # type: ignore[arg-type]


def test_sticky_instances_do_not_share_state() -> None:
    a, b = StickyAssignor(), StickyAssignor()
    a.on_assignment(Assignment((TopicPartition("t", 0),)), generation=3)
    assert b.metadata(["t"]).user_data is None
    assert a.metadata(["t"]).user_data is not None


class RandomAssignor(PartitionAssignor):
    """The design document's custom example, seeded so that it is deterministic."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Mapping[str, Sequence[TopicPartition]]:
        rng = random.Random(self.seed)
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic in sorted(partitions_per_topic):
            members = sorted(m for m, s in subscriptions.items() if topic in s.topics)
            for p in range(partitions_per_topic[topic]):
                result[rng.choice(members)].append(TopicPartition(topic, p))
        return result


def test_custom_assignor_instance_and_class() -> None:
    subs = {"C0": ["t0", "t1"], "C1": ["t1"]}
    by_instance = plan(RandomAssignor(seed=7), {"t0": 5, "t1": 5}, subs)
    by_class = plan(RandomAssignor, {"t0": 5, "t1": 5}, subs)
    for result in (by_instance, by_class):
        everything = sorted(tp for ps in result.values() for tp in ps)
        assert everything == sorted(TopicPartition(t, p) for t in ("t0", "t1") for p in range(5))
        assert all(tp.topic == "t1" for tp in result["C1"])
    assert by_instance == plan(RandomAssignor(seed=7), {"t0": 5, "t1": 5}, subs)


def test_assignor_without_assign_cannot_be_built() -> None:
    class Incomplete(Assignor):
        name = "incomplete"

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


def test_metadata_carries_owned_generation_rack() -> None:
    sub = CooperativeStickyAssignor().metadata(
        ["b", "a", "a"], owned=[TopicPartition("a", 1)], generation=4, rack="r1"
    )
    assert sub.topics == ("a", "b")
    assert sub.owned_partitions == (TopicPartition("a", 1),)
    assert (sub.generation_id, sub.rack_id) == (4, "r1")
    assert sub.user_data == b"\xff\xff\xff\xff"  # generation -1 before any assignment


@pytest.mark.parametrize("strategy", ["range", "sticky", "cooperative-sticky", "optimal"])
def test_rack_aware_prefers_same_rack_without_losing_balance(strategy: str) -> None:
    counts = {"t": 6}
    subs = {"A": ["t"], "B": ["t"]}
    partition_racks = {"t": [["r1"], ["r2"], ["r1"], ["r2"], ["r1"], ["r2"]]}
    result = plan(strategy, counts, subs, racks={"A": "r2", "B": "r1"},
                  partition_racks=partition_racks)
    assert result == {"A": tps("tp1 tp3 tp5"), "B": tps("tp0 tp2 tp4")}


def test_rack_aware_sticky_keeps_balance_when_racks_are_skewed() -> None:
    counts = {"t": 4}
    subs = {"A": ["t"], "B": ["t"]}
    partition_racks = {"t": [["r1"]] * 4}
    result = plan("sticky", counts, subs, racks={"A": "r1", "B": "r2"},
                  partition_racks=partition_racks)
    assert sorted(len(v) for v in result.values()) == [2, 2]


def test_cooperative_withholds_moving_partitions() -> None:
    counts = {"t": 4}
    owned = {"A": [("t", p) for p in range(4)]}
    result = plan("cooperative-sticky", counts, {"A": ["t"], "B": ["t"]}, owned=owned)
    assert len(result["A"]) == 2 and result["B"] == []
    again = plan("cooperative-sticky", counts, {"A": ["t"], "B": ["t"]}, owned=result)
    assert again["A"] == result["A"] and len(again["B"]) == 2


def test_ownership_disputes() -> None:
    cluster = ClusterView({"t": 2})
    tp0 = TopicPartition("t", 0)
    newer = {
        "A": Subscription(("t",), owned_partitions=(tp0,), generation_id=5),
        "B": Subscription(("t",), owned_partitions=(tp0,), generation_id=4),
    }
    coop = CooperativeStickyAssignor()
    result = coop.assign(cluster, newer)
    assert result["A"].partitions == (tp0,)  # the higher generation keeps it
    tie = {
        "A": Subscription(("t",), owned_partitions=(tp0,), generation_id=5),
        "B": Subscription(("t",), owned_partitions=(tp0,), generation_id=5),
    }
    result = coop.assign(cluster, tie)
    # Both claim it in one generation: nobody may take it before both revoke.
    assert tp0 not in result["A"].partitions + result["B"].partitions


@pytest.mark.parametrize(
    ("partitions", "expected"),
    [(3, {"c1": ["t-1"], "c2": ["t-2"], "c3": []}),
     (4, {"c1": ["t-1", "t-3"], "c2": ["t-2"], "c3": []})],
)
def test_kafka_same_generation_claims_are_withheld(
    partitions: int, expected: dict[str, list[str]]
) -> None:
    """Kafka's CooperativeStickyAssignorTest: t-0 claimed by c1 and c2 in one generation."""
    tp = {f"t-{p}": TopicPartition("t", p) for p in range(partitions)}
    claims = {"c1": ("t-0", "t-1"), "c2": ("t-0", "t-2"), "c3": ()}
    subs = {
        m: Subscription(("t",), owned_partitions=tuple(tp[n] for n in names), generation_id=2)
        for m, names in claims.items()
    }
    result = CooperativeStickyAssignor().assign(ClusterView({"t": partitions}), subs)
    assert {m: list(a.partitions) for m, a in result.items()} == {
        m: [tp[n] for n in names] for m, names in expected.items()
    }


def test_cooperative_reads_generation_from_v1_user_data() -> None:
    """Subscription v1 has no generation field: the assignor's 4-byte user data carries it."""
    tp0 = TopicPartition("t", 0)
    newer, older = CooperativeStickyAssignor(), CooperativeStickyAssignor()
    newer.on_assignment(Assignment((tp0,)), generation=7)
    older.on_assignment(Assignment((tp0,)), generation=6)
    subs = {
        "a": newer.metadata(["t"], owned=[tp0]),
        "b": older.metadata(["t"], owned=[tp0]),
    }
    result = CooperativeStickyAssignor().assign(ClusterView({"t": 1}), subs)
    assert result["a"].partitions == (tp0,)
