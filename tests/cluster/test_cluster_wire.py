"""Leadership errors on the wire: Produce and Fetch to a node that does not lead the
partition, Fetch with a stale or future leader epoch, FindCoordinator on any node."""

from __future__ import annotations

import datetime
import re
import urllib.request
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.join_group.v9.request import JoinGroupRequest as JoinV9
from kio.schema.join_group.v9.request import JoinGroupRequestProtocol as ProtoV9
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import GroupId

from samsa.coordinator.hashing import partition_for
from samsa.protocol.codec import decode_response, encode_request
from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, query, wait_until
from tests.cluster.test_cluster_clients import (
    TOPIC,
    Cluster,
    cluster,  # noqa: F401 - the fixture
)
from tests.conformance.test_groups_protocol import (
    JOIN,
    SUBSCRIPTION,
    heartbeat,
    join9,
    join_two_step,
    ms,
    sync5,
)
from tests.records import make_batch
from tests.wire import WireClient


def _produce(index: int) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(
            PartitionProduceData(index=index, records=make_batch([(b"k", b"v")])),)),))


def _fetch(index: int, epoch: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=TOPIC, partitions=(FetchPartition(
            partition=index, current_leader_epoch=epoch, fetch_offset=0,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id="")


def _list_offsets(index: int, epoch: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=TOPIC, partitions=(ListOffsetsPartition(
            partition_index=index, current_leader_epoch=epoch, timestamp=-1),)),))


def test_only_the_leader_serves_a_partition(cluster: Cluster) -> None:  # noqa: F811
    """Produce, Fetch and ListOffsets on the leader and on another node: the other answers
    NOT_LEADER_OR_FOLLOWER, a stale epoch FENCED_LEADER_EPOCH, a future one
    UNKNOWN_LEADER_EPOCH; Fetch v12 names the current leader and epoch on the first two,
    ListOffsets the lease's epoch."""
    leader, epoch = leases(cluster.dsn)[(TOPIC, 0)]
    assert leader is not None
    other = next(i for i in cluster.nodes if i != leader)
    to_leader = WireClient(cluster.nodes[leader].bootstrap)
    to_other = WireClient(cluster.nodes[other].bootstrap)
    produced = to_leader.call(0, 9, _produce(0)).responses[0].partition_responses[0]
    assert produced.error_code == ErrorCode.none
    refused = to_other.call(0, 9, _produce(0)).responses[0].partition_responses[0]
    assert refused.error_code == ErrorCode.not_leader_or_follower

    def fetch(client: WireClient, leader_epoch: int) -> tuple[ErrorCode, tuple[int, int]]:
        found = client.call(1, 12, _fetch(0, leader_epoch)).responses[0].partitions[0]
        current = found.current_leader
        return ErrorCode(found.error_code), (int(current.leader_id), int(current.leader_epoch))

    unset = (-1, -1)
    assert fetch(to_leader, epoch) == (ErrorCode.none, unset)
    assert fetch(to_leader, -1) == (ErrorCode.none, unset)
    assert fetch(to_leader, epoch - 1) == (ErrorCode.fenced_leader_epoch, (leader, epoch))
    assert fetch(to_leader, epoch + 1) == (ErrorCode.unknown_leader_epoch, unset)
    assert fetch(to_other, -1) == (ErrorCode.not_leader_or_follower, (leader, epoch))

    def list_offsets(client: WireClient, leader_epoch: int) -> tuple[ErrorCode, int, int]:
        found = client.call(2, 7, _list_offsets(0, leader_epoch)).topics[0].partitions[0]
        return ErrorCode(found.error_code), int(found.offset), int(found.leader_epoch)

    assert list_offsets(to_leader, -1) == (ErrorCode.none, 1, epoch)
    assert list_offsets(to_leader, epoch) == (ErrorCode.none, 1, epoch)
    assert list_offsets(to_leader, epoch - 1) == (ErrorCode.fenced_leader_epoch, -1, -1)
    assert list_offsets(to_leader, epoch + 1) == (ErrorCode.unknown_leader_epoch, -1, -1)
    assert list_offsets(to_other, -1)[0] == ErrorCode.not_leader_or_follower
    to_leader.close()
    to_other.close()


def test_find_coordinator_names_the_shard_owner_from_any_node(cluster: Cluster  # noqa: F811
                                                              ) -> None:
    groups = [f"g{i}" for i in range(12)]
    owners = {g: leases(cluster.dsn)[("__consumer_offsets", partition_for(g, 6))][0]
              for g in groups}

    def answers(node: ClusterNodeProcess) -> set[tuple[str, ErrorCode, int, int]]:
        c = WireClient(node.bootstrap)
        found = c.call(10, 4, FindCoordinatorRequest(key_type=0,
                                                     coordinator_keys=tuple(groups)))
        c.close()
        return {(e.key, ErrorCode(e.error_code), int(e.node_id), int(e.port))
                for e in found.coordinators}

    expected = {(g, ErrorCode.none, owners[g], cluster.nodes[owners[g]].port) for g in groups}
    for node in cluster.nodes.values():  # each node's view trails the database by a tick
        wait_until(lambda n=node: answers(n) == expected, 10, f"node {node.node_id}'s answer")


def test_find_coordinator_without_an_owner(tmp_path: Path, pg_dsn: str) -> None:
    """COORDINATOR_NOT_AVAILABLE while a shard has no owner; its owner takes it back."""
    c = Cluster(tmp_path, pg_dsn, {"cluster.lease.ttl.ms": "60000"})
    try:
        a, b = c.start(1), c.start(2)
        wait_until(lambda: all_owned(pg_dsn, {1, 2}), 30, "every lease held")
        group = next(g for g in (f"g{i}" for i in range(100))
                     if c.owner("__consumer_offsets", partition_for(g, 6)) == 2)
        shard = partition_for(group, 6)

        def find(node: ClusterNodeProcess) -> tuple[ErrorCode, int]:
            client = WireClient(node.bootstrap)
            found = client.call(10, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=(group,))).coordinators[0]
            client.close()
            return ErrorCode(found.error_code), int(found.node_id)

        wait_until(lambda: find(a) == (ErrorCode.none, 2), 10, "node 1 naming node 2")
        b.pause()  # node 2 stays registered (long TTL) but cannot take the shard back yet
        try:
            query(pg_dsn, "UPDATE samsa_partitions SET owner = NULL, epoch = epoch + 1 "
                  "WHERE topic = '__consumer_offsets' AND idx = $1", shard)
            query(pg_dsn, "NOTIFY samsa_cluster")
            wait_until(lambda: find(a)[0] == ErrorCode.coordinator_not_available, 10,
                       "COORDINATOR_NOT_AVAILABLE")
        finally:
            b.resume()
        wait_until(lambda: find(a) == (ErrorCode.none, 2), 20, "node 2 owning the shard again")
    finally:
        c.stop()


def test_killed_node_is_taken_over_before_its_ttl(tmp_path: Path, pg_dsn: str) -> None:
    """A SIGKILLed node's connections close, releasing its advisory lock: the others take
    its leases at once rather than after the (here one minute) TTL; metrics count it."""
    c = Cluster(tmp_path, pg_dsn)
    try:
        nodes = [ClusterNodeProcess(tmp_path, i, pg_dsn, {"cluster.lease.ttl.ms": "60000"})
                 for i in (1, 2)]
        for n in nodes:
            n.extra_args += ["--metrics-port", "0"]
            n.start()
            c.nodes[n.node_id] = n
        wait_until(lambda: all_owned(pg_dsn, {1, 2}), 30, "every lease held")

        def scrape(node: ClusterNodeProcess) -> dict[str, float]:
            m = re.search(r"metrics on http://[\d.]+:(\d+)/metrics", node.log_path.read_text())
            assert m is not None
            with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics",
                                        timeout=10) as resp:
                text = resp.read().decode()
            return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines() if line.startswith("samsa_cluster")}

        def shards() -> float:
            return sum(scrape(n)['samsa_cluster_leases{kind="coordinator_shard"}']
                       for n in nodes)

        wait_until(lambda: shards() == 6, 20, "the shard leases adding up")
        assert all(scrape(n)["samsa_cluster_live_nodes"] == 2 for n in nodes)
        nodes[1].kill()
        wait_until(lambda: all_owned(pg_dsn, {1}), 15, "node 1 taking every lease")
        # the node's gauges follow its lease rows once it has loaded the shards it took
        wait_until(lambda: scrape(nodes[0])['samsa_cluster_leases{kind="coordinator_shard"}']
                   == 6, 10, "node 1 counting every shard lease")
        after = scrape(nodes[0])
        assert after["samsa_cluster_lease_takeovers_total"] >= 1
    finally:
        c.stop()


def test_losing_a_shard_answers_parked_requests_and_reloads(tmp_path: Path,
                                                            pg_dsn: str) -> None:
    """A JoinGroup parked in a rebalance is answered NOT_COORDINATOR when the node loses
    the shard's lease; the node takes the shard back (a higher epoch), replays it, and the
    group's member is still there."""
    c = Cluster(tmp_path, pg_dsn, {"cluster.lease.ttl.ms": "60000"})
    try:
        c.start(1)
        node = c.start(2)
        wait_until(lambda: all_owned(pg_dsn, {1, 2}), 30, "every lease held")
        group = next(g for g in (f"g{i}" for i in range(100))
                     if c.owner("__consumer_offsets", partition_for(g, 6)) == 2)
        shard = partition_for(group, 6)

        def coordinating() -> bool:
            client = WireClient(node.bootstrap)
            found = client.call(10, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=(group,))).coordinators[0]
            client.close()
            return found.error_code == ErrorCode.none and found.node_id == 2

        wait_until(coordinating, 10, "node 2 coordinating")
        a = WireClient(node.bootstrap)
        joined = join_two_step(a, group)
        assert joined.error_code == ErrorCode.none
        synced = sync5(a, group, joined.generation_id, joined.member_id,
                       {joined.member_id: b""})
        assert synced.error_code == ErrorCode.none
        b = WireClient(node.bootstrap)
        first = join9(b, group)
        assert first.error_code == ErrorCode.member_id_required
        # B's JoinGroup parks: the group waits (rebalance timeout 6 s) for A to rejoin.
        b.send_raw(encode_request(JOIN, 9, 99, "b", JoinV9(
            group_id=GroupId(group), session_timeout=ms(6000), rebalance_timeout=ms(6000),
            member_id=first.member_id, group_instance_id=None, protocol_type="consumer",
            protocols=(ProtoV9(name="range", metadata=SUBSCRIPTION),), reason=None)))
        _, epoch = leases(pg_dsn)[("__consumer_offsets", shard)]
        query(pg_dsn, "UPDATE samsa_partitions SET epoch = epoch + 1 "
              "WHERE topic = '__consumer_offsets' AND idx = $1", shard)
        query(pg_dsn, "NOTIFY samsa_cluster")
        cid, parked = decode_response(b.read_frame(), JOIN, 9)
        assert cid == 99
        assert parked.error_code == ErrorCode.not_coordinator
        wait_until(lambda: leases(pg_dsn)[("__consumer_offsets", shard)] == (2, epoch + 2),
                   10, "node 2 taking the shard back")
        wait_until(lambda: heartbeat(a, group, joined.generation_id, joined.member_id) == 0,
                   10, "A's heartbeat accepted by the reloaded shard")
        a.close()
        b.close()
    finally:
        c.stop()


def test_describe_cluster_lists_the_live_nodes(cluster: Cluster) -> None:  # noqa: F811
    """Every node's DescribeCluster (confluent-kafka's describe_cluster) lists the three
    nodes at their addresses, the lowest id as controller; a killed node drops out."""

    def described(node: ClusterNodeProcess) -> tuple[set[tuple[int, str, int]], int] | None:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        try:
            found = admin.describe_cluster(request_timeout=5).result(10)
        except KafkaException:  # sent to the controller named in Metadata: maybe the dead one
            return None
        return {(n.id, n.host, n.port) for n in found.nodes}, found.controller.id

    every = {(i, "127.0.0.1", n.port) for i, n in cluster.nodes.items()}
    for node in cluster.nodes.values():
        assert described(node) == (every, 1)
    cluster.nodes[1].kill()
    rest = {n for n in every if n[0] != 1}
    for i in (2, 3):
        wait_until(lambda i=i: described(cluster.nodes[i]) == (rest, 2), 20,
                   f"node {i} listing nodes 2 and 3")


def test_offsets_by_topic_id_on_a_node_that_did_not_create_the_topic(
        cluster: Cluster) -> None:  # noqa: F811
    """OffsetCommit and OffsetFetch v10 name topics by id: a coordinator node resolves the
    id of a topic another node created a moment ago (its view may trail the database: an
    unknown id makes it read the topics again), and an id no node knows is
    UNKNOWN_TOPIC_ID."""
    import uuid

    from samsa.protocol.api_keys import ApiKey
    from tests.broker.test_group_api_versions import call

    shards = leases(cluster.dsn)
    owners = {g: shards[("__consumer_offsets", partition_for(g, 6))][0]
              for g in (f"gid{i}" for i in range(50))}
    group, node = next((g, n) for g, n in owners.items() if n is not None and n != 1)
    owner = cluster.nodes[node]
    creator = WireClient(cluster.nodes[1].bootstrap)
    c = WireClient(owner.bootstrap)
    try:
        (made,) = call(creator, ApiKey.CREATE_TOPICS, 7, timeout=10000, validate_only=False,
                       topics=[{"name": "by-id", "num_partitions": 2, "replication_factor": 1,
                                "assignments": [], "configs": []}]).topics
        assert made.error_code == ErrorCode.none
        unknown = uuid.uuid4()
        resp = call(c, ApiKey.OFFSET_COMMIT, 10, group_id=group,
                    generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    topics=[{"topic_id": tid, "partitions": [
                        {"partition_index": 1, "committed_offset": 7,
                         "committed_leader_epoch": -1, "committed_metadata": "m"}]}
                        for tid in (made.topic_id, unknown)])
        assert [(t.topic_id, t.partitions[0].error_code) for t in resp.topics] == [
            (made.topic_id, ErrorCode.none), (unknown, ErrorCode.unknown_topic_id)]
        (g,) = call(c, ApiKey.OFFSET_FETCH, 10, require_stable=False, groups=[
            {"group_id": group, "topics": None}]).groups
        assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.metadata)
                              for p in t.partitions]) for t in g.topics] == [
            (made.topic_id, [(1, 7, "m")])]
    finally:
        creator.close()
        c.close()
