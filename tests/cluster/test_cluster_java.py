"""Apache Kafka's Java consumer in a group on three samsa nodes over PostgreSQL while the
node coordinating the group is SIGKILLed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from samsa.coordinator.hashing import partition_for
from tests.cluster.nodes import wait_until
from tests.cluster.test_cluster_clients import (
    PARTITIONS,
    TOPIC,
    Cluster,
    cluster,  # noqa: F401 - the fixture
    consumer,
    end_offsets,
    produce,
    wait_rebalancing,
)
from tests.conformance.javakit import JavaKit, JavaMember, compiled

pytestmark = [pytest.mark.conformance, pytest.mark.slow]


@pytest.fixture
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaKit]:
    kit = compiled(tmp_path_factory)
    yield kit
    kit.stop_all()


@pytest.mark.parametrize("moment", ["stable", "rebalance"])
def test_java_group_survives_the_coordinator_node(cluster: Cluster,  # noqa: F811
                                                   java: JavaKit, moment: str) -> None:
    """Java consumers in a group go on after the SIGKILL of the node coordinating it, in a
    stable group or while a third member's join rebalances it; they consume every
    acknowledged record and commit the end offsets through the new coordinator."""
    group = f"java-survivors-{moment}"
    coordinator = cluster.owner("__consumer_offsets", partition_for(group, 6))
    acked: set[bytes] = set()
    produce(cluster.bootstrap, [b"j%d" % i for i in range(200)], acked)
    # Heartbeats a second apart: the others rejoin up to a second after a member joins.
    settings = {"auto.offset.reset": "earliest", "enable.auto.commit": "false",
                "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}
    members = [JavaMember(java, cluster.bootstrap, group, [TOPIC], name, **settings)
               for name in ("a", "b")]
    expected = {v.decode() for v in acked}

    def consumed() -> set[str]:
        return {v for m in members for v in m.values()}

    wait_until(lambda: len(consumed()) >= 100, 60, "consumption before the kill")
    if moment == "rebalance":
        members.append(JavaMember(java, cluster.bootstrap, group, [TOPIC], "c", **settings))
        wait_rebalancing(cluster.nodes[coordinator].bootstrap, group)
    cluster.nodes[coordinator].kill()
    produce(cluster.bootstrap, [b"k%d" % i for i in range(200)], acked)
    expected = {v.decode() for v in acked}
    wait_until(lambda: consumed() >= expected, 90, "every acknowledged record consumed")

    def commit_all() -> bool:
        return all(m.commit().get("ok") for m in members)

    checker = consumer(cluster.bootstrap, group)
    ends = end_offsets(checker)

    def commits_reach_the_ends() -> bool:
        # A rebalance after the kill can hand a partition to a member that has not polled
        # it yet (nothing was committed, so it starts at 0): it commits 0 until it has
        # read the partition again, so commit until the commits reach the end offsets.
        if not commit_all():
            return False
        done = checker.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                 timeout=10)
        return {tp.partition: tp.offset for tp in done} == ends

    try:
        wait_until(commits_reach_the_ends, 60,
                   "commits through the new coordinator equal the end offsets")
    finally:
        checker.close()
    assert not [e for m in members for e in m.errors() if e.get("fatal")]
    for m in members:
        m.close()
