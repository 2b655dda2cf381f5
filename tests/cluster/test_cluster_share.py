"""Share groups (KIP-932) on three samsa nodes over PostgreSQL, with confluent-kafka's
``ShareConsumer``: share partitions follow their partition's lease.

A consumer in explicit mode acquires every record of a topic whose partition leaders are
spread over the nodes, produced before it joined (the group's
``share.auto.offset.reset=earliest``, set through one node), and accepts them, then
acquires more records of a partition led by the node that coordinates the group and leaves
them acquired; that node is SIGKILLed. Its leases move: the new coordinator replays the
share group and DescribeShareGroupOffsets reads the states back; the new leader of the
partition loads its share partition's state, so a second consumer gets exactly the records
left acquired, with a delivery count of 2 (the acquisition was saved before the fetch was
answered), and no accepted record again; afterwards every partition's start offset is at
the log end, with no lag. Then AlterShareGroupOffsets on the coordinator moves every share
partition back to the log start, those other nodes lead too (they reload the state on
their next tick), and a third consumer gets every record again. Last, the killed node is
restarted and handed its partitions back (their share states move with them): a fourth
consumer gets only the records produced since.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from samsa.broker.topics import OFFSETS_TOPIC as OFFSETS
from samsa.coordinator.hashing import partition_for
from samsa.protocol.api_keys import ApiKey
from tests.cluster.nodes import FAST, leases, wait_until
from tests.cluster.test_cluster_clients import PARTITIONS, TOPIC, Cluster, three_nodes
from tests.cluster.test_cluster_configs import GROUP, GROUP_CONFIG, described, everywhere
from tests.conformance.groupkit import produce
from tests.conformance.javakit import JavaKit
from tests.conformance.sharekit import (
    SHARE_BROKER_CONFIG,
    poll_until,
    set_group_configs,
    share_consumer,
)
from tests.pg import PostgresServer
from tests.wire import call_once

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

PER_PARTITION = 10
#: locks far longer than the test: records come back through the new leader's reload
CONFIG = {**SHARE_BROKER_CONFIG, "group.share.record.lock.duration.ms": "60000"}


def _group_on_a_leader(dsn: str) -> tuple[str, int]:
    """A group id whose coordinator shard's owner also leads a partition of ``TOPIC``."""
    held = leases(dsn)
    leaders = {held[(TOPIC, p)][0] for p in range(PARTITIONS)}
    shards = int(FAST["offsets.topic.num.partitions"])
    for n in itertools.count():
        group = f"share-cluster-{n}"
        owner = held[(OFFSETS, partition_for(group, shards))][0]
        if owner in leaders:
            assert owner is not None
            return group, owner
    raise AssertionError("unreachable")


def _coordinator(cluster: Cluster, group: str) -> str:
    shard = partition_for(group, int(FAST["offsets.topic.num.partitions"]))
    return cluster.nodes[cluster.owner(OFFSETS, shard)].bootstrap


def _offsets(cluster: Cluster, group: str, topic: str = TOPIC) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) of ``TOPIC``, as DescribeShareGroupOffsets v1 on the
    group's coordinator says (partitions without share state left out)."""
    answer = call_once(_coordinator(cluster, group), ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                       DescribeShareGroupOffsetsRequest(groups=(
                           DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group),
                                                                 topics=None),)))
    found = answer.groups[0]
    if found.error_code == ErrorCode.group_id_not_found:  # the member did not join yet
        return {}
    assert found.error_code == ErrorCode.none, found
    return {int(p.partition_index): (int(p.start_offset), int(p.lag))
            for t in found.topics if t.topic_name == topic for p in t.partitions
            if p.error_code == ErrorCode.none and p.start_offset >= 0}


def _reset(cluster: Cluster, group: str) -> ErrorCode:
    """AlterShareGroupOffsets to 0 of every partition of ``TOPIC`` on the coordinator."""
    answer = call_once(_coordinator(cluster, group), ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0,
                       AlterShareGroupOffsetsRequest(group_id=GroupId(group), topics=(
                           AlterShareGroupOffsetsRequestTopic(
                               topic_name=TopicName(TOPIC), partitions=tuple(
                                   AlterShareGroupOffsetsRequestPartition(
                                       partition_index=i32(p), start_offset=i64(0))
                                   for p in range(PARTITIONS))),)))
    if answer.error_code != ErrorCode.none:
        return ErrorCode(answer.error_code)
    assert all(p.error_code == ErrorCode.none for t in answer.responses for p in t.partitions)
    return ErrorCode.none


def _produce_to(bootstrap: str, partition: int, count: int) -> set[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = {f"{TOPIC}/{partition}/more{i}".encode() for i in range(count)}
    for v in sorted(values):
        p.produce(TOPIC, value=v, partition=partition)
    assert p.flush(15) == 0
    return values


@pytest.fixture(scope="module")
def share_cluster(tmp_path_factory: pytest.TempPathFactory,
                  postgres: PostgresServer) -> Iterator[Cluster]:
    """Nodes 1-3 with ``TOPIC``; each test restarts the node it killed."""
    dsn = postgres.create_database()
    with three_nodes(tmp_path_factory.mktemp("share-cluster"), dsn, CONFIG) as cluster:
        yield cluster


def test_share_partitions_follow_the_lease_of_a_killed_leader(share_cluster: Cluster) -> None:
    cluster = share_cluster
    group, victim = _group_on_a_leader(cluster.dsn)
    lost = {p for p in range(PARTITIONS) if cluster.owner(TOPIC, p) == victim}
    # the share partitions start at the log start: the group config, set through one
    # node, is every node's
    set_group_configs(cluster.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    everywhere(cluster, lambda b: described(b, GROUP, group)["share.auto.offset.reset"] == (
        "earliest", GROUP_CONFIG), "share.auto.offset.reset=earliest")
    values = produce(cluster.bootstrap, TOPIC, PARTITIONS, PER_PARTITION)
    a = share_consumer(cluster.bootstrap, group, [TOPIC], "a",
                       **{"share.acknowledgement.mode": "explicit"})
    try:
        poll_until([a], lambda: len(a.got) == len(values), timeout=60,
                   on_message=lambda s, m: s.consumer.acknowledge(m, AcknowledgeType.ACCEPT))
        assert all(n == 1 for *_, n in a.got)
        # more records on a partition the victim leads: those of the last poll are left
        # acquired (explicit mode wants a poll's records acknowledged before the next)
        # and nothing saves the share partition after they were acquired
        target = min(lost)
        more = _produce_to(cluster.bootstrap, target, PER_PARTITION)
        held: set[bytes] = set()
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(seen) < len(more):
            assert time.monotonic() < deadline, "the new records never came"
            got = a.poll(0.5)
            seen |= {m.value() for m in got}
            last = len(seen) == len(more)
            for m in got:
                if last:
                    held.add(m.value())
                else:
                    a.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if not last:
                a.consumer.commit_sync(15)
        assert held and all(m.partition() == target for m in a.last)
        cluster.nodes[victim].kill()
    finally:
        a.close()
    cluster.settled()
    assert cluster.owner(TOPIC, target) != victim
    # the new coordinator replayed the share group; the states are read from the table
    before = {p: (PER_PARTITION, 0) for p in range(PARTITIONS)}
    before[target] = (PER_PARTITION, len(held))
    wait_until(lambda: _offsets(cluster, group) == before, 30,
               "DescribeShareGroupOffsets on the new coordinator")

    b = share_consumer(cluster.bootstrap, group, [TOPIC], "b")
    try:
        poll_until([b], lambda: {v for _, _, v, _ in b.got} >= held, timeout=60)
        for _ in range(10):  # nothing else comes
            b.poll(0.2)
    finally:
        b.close()
    assert sorted(v for _, _, v, _ in b.got) == sorted(held)  # once each, none accepted
    assert all(n >= 2 for *_, n in b.got), b.got

    def agreed() -> bool:
        return _offsets(cluster, group) == {
            p: (PER_PARTITION * (2 if p == target else 1), 0) for p in range(PARTITIONS)}

    wait_until(agreed, 30, "DescribeShareGroupOffsets at the log end, no lag")

    # AlterShareGroupOffsets on the coordinator moves every share partition back to 0,
    # those led by another node too: a new consumer gets every record again, fresh
    wait_until(lambda: _reset(cluster, group) == ErrorCode.none, 30,
               "AlterShareGroupOffsets once the group is empty")
    everything = values | more
    assert _offsets(cluster, group) == {
        p: (0, PER_PARTITION * (2 if p == target else 1)) for p in range(PARTITIONS)}
    c = share_consumer(cluster.bootstrap, group, [TOPIC], "c")
    try:
        poll_until([c], lambda: len(c.got) >= len(everything), timeout=60)
        c.consumer.commit_sync(15)  # implicit mode: the last poll's records accepted
    finally:
        c.close()
    assert sorted(v for _, _, v, _ in c.got) == sorted(everything)
    assert all(n == 1 for *_, n in c.got)
    wait_until(agreed, 30, "every record accepted again")

    # the killed node comes back: leases are handed over to it (the share partitions'
    # saves finish first) and it loads their states; only new records come
    cluster.restart_killed()
    assert {p for p in range(PARTITIONS) if cluster.owner(TOPIC, p) == victim}
    assert agreed()
    new = produce(cluster.bootstrap, TOPIC, PARTITIONS, 1, tag="new")
    d = share_consumer(cluster.bootstrap, group, [TOPIC], "d")
    try:
        poll_until([d], lambda: len(d.got) >= len(new), timeout=60)
        for _ in range(10):
            d.poll(0.2)
    finally:
        d.close()
    assert sorted(v for _, _, v, _ in d.got) == sorted(new)


def test_java_share_consumer_follows_a_killed_leader(share_cluster: Cluster,
                                                     java: JavaKit) -> None:
    """Kafka's ``KafkaShareConsumer`` (explicit mode, each poll accepted and committed)
    reads a topic whose leaders are spread while the node leading some of its partitions
    (not the group's coordinator) is SIGKILLed: it gets every record; only records of the
    killed node's partitions may come twice (a commit the kill cut off), the second time
    with a delivery count of 2 or more."""
    cluster = share_cluster
    topic, group = "java-events", "java-share"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    cluster.settled()
    coordinator = cluster.owner(OFFSETS, partition_for(
        group, int(FAST["offsets.topic.num.partitions"])))
    victim = next(cluster.owner(topic, p) for p in range(PARTITIONS)
                  if cluster.owner(topic, p) != coordinator)
    lost = {p for p in range(PARTITIONS) if cluster.owner(topic, p) == victim}
    set_group_configs(cluster.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    everywhere(cluster, lambda b: described(b, GROUP, group)["share.auto.offset.reset"] == (
        "earliest", GROUP_CONFIG), "share.auto.offset.reset=earliest")
    values = {v.decode() for v in produce(cluster.bootstrap, topic, PARTITIONS, 40)}
    member = java.start("ShareMember", cluster.bootstrap, group, topic,
                        "reconnect.backoff.max.ms=200", "retry.backoff.max.ms=300",
                        "max.poll.records=5", "share.acknowledgement.mode=explicit",
                        name="java-share")
    try:

        def seen() -> list[list[Any]]:
            return [r for e in member.of("records") for r in e["records"]]

        wait_until(lambda: len(seen()) >= len(values) // 4, 60, "a quarter of the records")
        cluster.nodes[victim].kill()
        wait_until(lambda: {r[2] for r in seen()} >= values, 90, "every record")
        assert member.close() == 0
    finally:
        member.kill()
    counts = Counter(r[2] for r in seen())
    twice = {v for v, n in counts.items() if n > 1}
    assert all(int(v.split("/")[1]) in lost for v in twice), twice
    firsts: set[str] = set()
    for _, _, value, count in seen():
        assert count >= (2 if value in firsts else 1)
        firsts.add(value)
    cluster.restart_killed()
