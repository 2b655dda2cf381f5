"""Transactions on three samsa nodes over one PostgreSQL, with confluent-kafka (librdkafka):
the transaction coordinator's shard is leased like a group shard, markers reach partitions
other nodes lead (forwarded through the database), and SIGKILLing the coordinator's node
or a data partition's leader loses no committed transaction and exposes no aborted one."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from samsa.broker.topics import OFFSETS_TOPIC
from samsa.coordinator.hashing import partition_for
from tests.cluster.nodes import query, wait_until
from tests.cluster.test_cluster_clients import Cluster
from tests.cluster.txn_cluster import coordinator_node, txn_cluster
from tests.conformance.javakit import JavaKit
from tests.conformance.test_transactions import batches, committed, lso, make_topic, read_all
from tests.conformance.test_transactions_verify import Txn
from tests.wire import WireClient

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

TIMEOUT_S = 30
#: ``offsets.topic.num.partitions`` of the test clusters (tests/cluster/nodes.py)
OFFSETS_PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    with txn_cluster(tmp_path, pg_dsn) as c:
        yield c


def producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "socket.connection.setup.timeout.ms": 3000, "transaction.timeout.ms": 20000})
    p.init_transactions(TIMEOUT_S)
    return p


def committed_values(bootstrap: str, topic: str, partitions: int, expect: int) -> list[str]:
    """The values a read_committed consumer reads from the start (sorted), once ``expect``
    arrived and again after a quiet second (nothing more may come)."""
    first = sorted(read_all(bootstrap, topic, partitions, "read_committed", expect=expect))
    assert sorted(read_all(bootstrap, topic, partitions, "read_committed", wait_s=1.0)) == first
    return first


def test_commit_and_abort_across_nodes_survive_leader_kills(cluster: Cluster) -> None:
    """A transaction over six partitions (led by three nodes) commits, the next aborts:
    read_committed sees the first only, through every node; after the coordinator's node
    and then a data partition's leader are SIGKILLed, still the same."""
    bootstrap = cluster.bootstrap
    topic = make_topic(bootstrap, 6)
    cluster.settled()
    tid = f"t-{uuid.uuid4().hex[:6]}"
    p = producer(bootstrap, tid)
    for outcome in ("commit", "abort"):
        p.begin_transaction()
        for part in range(6):
            p.produce(topic, value=f"{outcome}-{part}".encode(), partition=part)
        if outcome == "commit":
            p.commit_transaction(TIMEOUT_S)
        else:
            assert p.flush(TIMEOUT_S) == 0  # in the logs, then aborted
            p.abort_transaction(TIMEOUT_S)
    committed = sorted(f"commit-{part}" for part in range(6))
    for node in cluster.nodes.values():
        assert committed_values(node.bootstrap, topic, 6, 6) == committed
    assert len(read_all(bootstrap, topic, 6, "read_uncommitted", expect=12)) == 12

    cluster.nodes[coordinator_node(cluster, tid)].kill()
    cluster.settled()
    # the new coordinator serves the id: another transaction commits
    p.begin_transaction()
    p.produce(topic, value=b"after-0", partition=0)
    p.commit_transaction(TIMEOUT_S)
    committed = sorted([*committed, "after-0"])
    cluster.restart_killed()
    leader = cluster.owner(topic, 1)
    cluster.nodes[leader].kill()  # its partitions' new leaders rebuild the aborted list
    cluster.settled()
    survivor = next(n for n in cluster.nodes.values() if n.alive())
    assert committed_values(survivor.bootstrap, topic, 6, 7) == committed
    p.flush(5)


def test_first_batches_verified_by_a_coordinator_on_another_node(cluster: Cluster) -> None:
    """KIP-890 part 1 across nodes: a partition's leader that does not hold the
    transactional id's shard asks its holder through the database. A transactional batch
    for a partition never added is refused there (INVALID_TXN_STATE, nothing appended), an
    added one is written, and once the transaction is aborted a late batch cannot open a
    hanging transaction. (librdkafka's transactions across nodes, verified the same way,
    are the other tests of this module.)"""
    bootstrap = cluster.bootstrap
    topic = make_topic(bootstrap, 6)
    producer(bootstrap, f"t-{uuid.uuid4().hex[:6]}")  # __transaction_state exists
    cluster.settled()
    tid = f"v-{uuid.uuid4().hex[:6]}"
    coordinator = coordinator_node(cluster, tid)
    part = next(i for i in range(6) if cluster.owner(topic, i) != coordinator)
    leader = cluster.nodes[cluster.owner(topic, part)].bootstrap
    txn = Txn(cluster.nodes[coordinator].bootstrap, tid)
    via = WireClient(leader)
    try:
        assert txn.produce(topic, part, via=via) == ErrorCode.invalid_txn_state
        assert batches(leader, topic, part) == []
        assert txn.add(topic, part) == 0
        assert txn.produce(topic, part, via=via) == 0
        assert txn.end(commit=False) == 0
        wait_until(lambda: lso(bootstrap, topic, part) == 2, TIMEOUT_S, "the abort marker")
        assert txn.produce(topic, part, via=via) == ErrorCode.invalid_txn_state
        assert len(batches(leader, topic, part)) == 2
    finally:
        via.close()
        txn.close()


def _rewind(c: Consumer) -> None:
    """Back to the group's committed offsets (after an aborted transaction)."""
    for tp in c.committed(c.assignment(), TIMEOUT_S):
        c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def transform(bootstrap: str, source: str, sink: str, total: int, tid: str, group: str,
              after_commit: Callable[[int], None], errors: list[str]) -> int:
    """Consume-transform-produce until the group's committed offsets reach ``total``:
    batches of up to 10 records, each a transaction with its offsets; abortable errors
    abort and rewind, fatal ones start a new producer (fencing the old). The number of
    transactions committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500})
    c.subscribe([source])
    p = producer(bootstrap, tid)
    commits, done = 0, 0
    deadline = time.monotonic() + 120
    try:
        while done < total and time.monotonic() < deadline:
            batch = [m for m in c.consume(10, 1.0) if not m.error()]
            if not batch:
                continue
            try:
                p.begin_transaction()
                for m in batch:
                    p.produce(sink, value=b"out-" + m.value(), partition=m.partition())
                positions = c.position(c.assignment())
                p.send_offsets_to_transaction(positions, c.consumer_group_metadata(),
                                              TIMEOUT_S)
                while True:
                    try:
                        p.commit_transaction(TIMEOUT_S)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable():
                            raise
                commits += 1
                done = sum(max(tp.offset, 0) for tp in positions)
                after_commit(commits)
            except KafkaException as e:
                err = e.args[0]
                errors.append(str(err))
                if err.txn_requires_abort():
                    p.abort_transaction(TIMEOUT_S)
                else:
                    p = producer(bootstrap, tid)
                _rewind(c)
    finally:
        c.close()
    assert done == total, (done, total, errors)
    return commits


def test_coordinator_node_killed_during_a_stream_of_commits(cluster: Cluster) -> None:
    """Exactly once across a SIGKILL of the transaction coordinator's node in the middle of
    a stream of consume-transform-produce transactions: every input is in the committed
    output once, none twice (no aborted record exposed), and the group's committed offsets
    (written in the transactions) reach the end of the input."""
    bootstrap = cluster.bootstrap
    source, sink = make_topic(bootstrap, 3), make_topic(bootstrap, 3)
    cluster.settled()
    total = 300
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(total):
        plain.produce(source, value=b"%04d" % i, partition=i % 3)
    assert plain.flush(TIMEOUT_S) == 0
    tid = f"eos-{uuid.uuid4().hex[:6]}"
    producer(bootstrap, tid).flush(TIMEOUT_S)  # __transaction_state exists: tid's node known
    cluster.settled()
    # The group's coordinator is on a node that is not killed: librdkafka 2.x caches the
    # group coordinator, forgets (decommissions) a broker gone from the metadata, and a
    # send_offsets_to_transaction to a decommissioned coordinator then waits for ever,
    # past its timeout and out of reach of pytest's (librdkafka issues #5456 and #5511).
    # The transaction coordinator's node is the one killed; the group's offsets still go
    # through every transaction.
    doomed = coordinator_node(cluster, tid)
    group = next(g for g in (f"g-{tid}-{i}" for i in range(1000))
                 if cluster.owner(OFFSETS_TOPIC, partition_for(g, OFFSETS_PARTITIONS)) != doomed)
    killed: list[int] = []

    def after_commit(n: int) -> None:
        if n == 5:  # kill in a background thread: commits keep flowing meanwhile
            node = coordinator_node(cluster, tid)
            assert node == doomed
            killed.append(node)
            threading.Thread(target=cluster.nodes[node].kill, daemon=True).start()

    errors: list[str] = []
    commits = transform(bootstrap, source, sink, total, tid, group, after_commit, errors)
    assert killed and commits > 5
    survivor = next(n for n in cluster.nodes.values() if n.alive())
    want = sorted(f"out-{i:04d}" for i in range(total))
    assert committed_values(survivor.bootstrap, sink, 3, total) == want
    # the offsets committed in the transactions, as a new read_committed member fetches them
    assert [committed(survivor.bootstrap, group, source, p) for p in range(3)] == [
        total // 3] * 3
    assert coordinator_node(cluster, tid) != killed[0]


def test_coordinator_killed_between_prepare_commit_and_its_markers(cluster: Cluster) -> None:
    """The transaction's partition leader is paused (SIGSTOP), so the marker its coordinator
    forwards waits in the mailbox after PrepareCommit was answered; the coordinator's node is
    SIGKILLed there. The new coordinator reloads the shard, finds PrepareCommit and has the
    marker written: the committed record becomes visible to read_committed."""
    bootstrap = cluster.bootstrap
    topic = make_topic(bootstrap, 3)
    tid = f"t-{uuid.uuid4().hex[:6]}"
    p = producer(bootstrap, tid)  # creates __transaction_state
    cluster.settled()
    coordinator = coordinator_node(cluster, tid)
    part = next(i for i in range(3) if cluster.owner(topic, i) != coordinator)
    leader = cluster.nodes[cluster.owner(topic, part)]
    p.begin_transaction()
    p.produce(topic, value=b"decided", partition=part)
    assert p.flush(TIMEOUT_S) == 0
    leader.pause()
    try:
        p.commit_transaction(TIMEOUT_S)  # answered once PrepareCommit is durable
        wait_until(lambda: bool(query(cluster.dsn, "SELECT 1 FROM samsa_txn_markers")), 10,
                   "the marker forwarded to the paused leader")
        cluster.nodes[coordinator].kill()
    finally:
        leader.resume()
    cluster.settled()
    wait_until(lambda: not query(cluster.dsn, "SELECT 1 FROM samsa_txn_markers"), 30,
               "the new coordinator's marker written")
    survivor = next(n for n in cluster.nodes.values() if n.alive())
    assert committed_values(survivor.bootstrap, topic, 3, 1) == ["decided"]
    assert coordinator_node(cluster, tid) != coordinator


@pytest.fixture(params=[2, 0], ids=["tv2", "tv1"])
def java_cluster(tmp_path: Path, pg_dsn: str, request: pytest.FixtureRequest
                 ) -> Iterator[Cluster]:
    with txn_cluster(tmp_path, pg_dsn, {"transaction.version": str(request.param)}) as c:
        yield c


def test_java_transactions_across_nodes(java_cluster: Cluster, java: JavaKit) -> None:
    """Apache Kafka's Java client 4.3 on the cluster, with transactions v2 (KIP-890: the
    partitions' leaders and the group's coordinator forward the implicit adds to the
    transaction's coordinator node) and v1: a commit with offsets sent to the transaction,
    an abort, then the coordinator's node SIGKILLed and a commit through its successor; the
    Java consumer (read_committed) sees the committed records only, and the group's offsets
    moved with the commits."""
    cluster = java_cluster
    bootstrap = cluster.bootstrap
    topic, source = make_topic(bootstrap, 3), make_topic(bootstrap, 1)
    group, tid = f"jg-{uuid.uuid4().hex[:6]}", f"jt-{uuid.uuid4().hex[:6]}"
    a = java.start("Txn", bootstrap, tid, name="txn-a")
    a.wait_for(lambda e: e.get("event") == "ready", TIMEOUT_S)
    for outcome in ("c1", "ab"):
        assert a.request("begin")["ok"]
        for i in range(3):
            assert a.request(f"send {topic} {i} {outcome}-{i}")["ok"]
        assert a.request(f"offsets {group} {source} 0 {7 if outcome == 'c1' else 99}")["ok"]
        assert a.request("commit" if outcome == "c1" else "abort")["ok"]
    cluster.nodes[coordinator_node(cluster, tid)].kill()
    cluster.settled()
    assert a.request("begin")["ok"]
    assert a.request(f"send {topic} 0 c2")["ok"]
    assert a.request(f"offsets {group} {source} 0 9")["ok"]
    reply = a.request("commit")
    assert reply["ok"], reply
    survivor = next(n for n in cluster.nodes.values() if n.alive())
    events = java.run("ReadAll", survivor.bootstrap, topic, "isolation.level=read_committed")
    kept = sorted(["c1-0", "c1-1", "c1-2", "c2"])
    assert sorted(e["value"] for e in events if e["event"] == "record") == kept
    assert committed(survivor.bootstrap, group, source) == 9
    # three transactions wrote to partition 0: v2 bumps the epoch at each end, v1 does not
    leader = cluster.nodes[cluster.owner(topic, 0)]
    epochs = {h.producer_epoch for h in batches(leader.bootstrap, topic, 0) if not h.is_control}
    tv2 = cluster.config["transaction.version"] == "2"
    assert len(epochs) == (3 if tv2 else 1), epochs
