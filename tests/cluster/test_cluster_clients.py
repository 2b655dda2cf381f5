"""Three samsa nodes over one PostgreSQL, driven by confluent-kafka (librdkafka)."""

from __future__ import annotations

import contextlib
import datetime
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import GroupId

from samsa.broker.topics import OFFSETS_TOPIC as OFFSETS
from samsa.coordinator.hashing import partition_for
from samsa.protocol.codec import decode_response, encode_request
from samsa.protocol.records import decode_batches
from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, query, wait_until
from tests.records import make_batch
from tests.wire import WireClient, call_once

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

TOPIC = "events"
PARTITIONS = 4


class Cluster:
    def __init__(self, root: Path, dsn: str, config: dict[str, str] | None = None) -> None:
        self.root, self.dsn, self.config = root, dsn, config or {}
        self.nodes: dict[int, ClusterNodeProcess] = {}

    def start(self, node_id: int) -> ClusterNodeProcess:
        node = ClusterNodeProcess(self.root, node_id, self.dsn, self.config).start()
        self.nodes[node_id] = node
        return node

    def live(self) -> set[int]:
        return {i for i, n in self.nodes.items() if n.alive()}

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def owner(self, topic: str, index: int) -> int:
        owner, _ = leases(self.dsn)[(topic, index)]
        assert owner is not None
        return owner

    def settled(self, timeout: float = 30) -> None:
        """Every lease held by a live node, and every live node's Metadata naming those
        owners (a node's view trails the database by up to a tick)."""
        wait_until(lambda: all_owned(self.dsn, self.live()), timeout, "every lease held")
        wait_until(self.agreed, timeout, "every node's Metadata naming the lease owners")

    def agreed(self) -> bool:
        """Each live node's Metadata names the database's owner and epoch as each
        partition's leader."""
        owners = {(t, p): v for (t, p), v in leases(self.dsn).items() if t != OFFSETS}
        return all({k: v for k, v in leaders(self.nodes[i].bootstrap).items()
                    if k[0] != OFFSETS} == owners for i in self.live())

    def restart_killed(self) -> None:
        """Start every node that died again (same id and port) and wait until settled."""
        for node in self.nodes.values():
            if not node.alive():
                node.start()
        self.settled()

    def stop(self) -> None:
        for node in self.nodes.values():
            node.kill()


@contextlib.contextmanager
def three_nodes(root: Path, dsn: str, config: dict[str, str] | None = None
                ) -> Iterator[Cluster]:
    """Nodes 1-3 with ``TOPIC`` created and every lease held."""
    c = Cluster(root, dsn, config)
    try:
        for i in (1, 2, 3):
            c.start(i)
        create_topic(c.bootstrap, PARTITIONS)
        c.settled()
        yield c
    finally:
        c.stop()


@pytest.fixture
def cluster(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    with three_nodes(tmp_path, pg_dsn) as c:
        yield c


def leaders(bootstrap: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (leader id, leader epoch), as one node's Metadata v12 says."""
    md = call_once(bootstrap, 3, 12, MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return {(t.name, p.partition_index): (int(p.leader_id), int(p.leader_epoch))
            for t in md.topics for p in t.partitions}


def group_state(bootstrap: str, group: str) -> str:
    """The group's state as one node describes it (DescribeGroups v5)."""
    found = call_once(bootstrap, 15, 5, DescribeGroupsRequest(
        groups=(GroupId(group),), include_authorized_operations=False)).groups[0]
    return str(found.group_state)


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)


def produce(bootstrap: str, values: list[bytes], acked: set[bytes],
            timeout: float = 60) -> None:
    """acks=all idempotent producer; ``acked`` gets every value the cluster acknowledged."""
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.add(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)})
    for v in values:
        p.produce(TOPIC, value=v, key=v, on_delivery=report)
        p.poll(0)
    assert p.flush(timeout) == 0
    assert not errors, errors


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


def end_offsets(c: Consumer) -> dict[int, int]:
    return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)}


def test_metadata_lists_the_nodes_and_each_partition_leader(cluster: Cluster) -> None:
    md = AdminClient({"bootstrap.servers": cluster.nodes[2].bootstrap}).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    found = leases(cluster.dsn, TOPIC)
    for p, meta in md.topics[TOPIC].partitions.items():
        assert meta.leader == found[(TOPIC, p)][0]
    # Partitions are spread over the three nodes, each node answers for all.
    assert len({owner for owner, _ in found.values()}) >= 2
    acked: set[bytes] = set()
    produce(cluster.nodes[1].bootstrap, [b"v%d" % i for i in range(200)], acked)
    c = consumer(cluster.nodes[3].bootstrap, "reader")
    c.subscribe([TOPIC])
    got: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    assert got == acked
    # samsa cluster status reads the same leases from the database.
    out = subprocess.run([sys.executable, "-m", "samsa.cli.main", "cluster", "status",
                          "--storage", cluster.dsn, "--output", "json"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    status = json.loads(out)
    assert [(n["id"], n["live"]) for n in status["nodes"]] == [(1, True), (2, True), (3, True)]
    assert sum(n["leases"] for n in status["nodes"]) == PARTITIONS + 6
    assert {(x["topic"], x["idx"]): x["owner"] for x in status["leases"]} == {
        k: owner for k, (owner, _) in leases(cluster.dsn).items()}


def read_all(bootstrap: str, partitions: int = PARTITIONS) -> list[bytes]:
    """Every record value of ``TOPIC``, read from offset 0 up to each partition's end."""
    c = consumer(bootstrap, "audit")
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(partitions)}
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    seen: list[bytes] = []
    reached = {p: 0 for p in range(partitions)}
    deadline = time.monotonic() + 60
    while any(reached[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.value())
            reached[m.partition()] = m.offset() + 1
    c.close()
    assert reached == ends, (reached, ends)
    return seen


def test_idempotent_producer_across_leader_kill(cluster: Cluster) -> None:
    """An acks=all idempotent producer keeps producing while partition 0's leader is
    SIGKILLed with records of partition 0 still unacknowledged; it goes on producing to
    the new leader. Every record is acknowledged, and the log holds each exactly once."""
    victim, epoch = leases(cluster.dsn)[(TOPIC, 0)]
    acked: dict[bytes, int] = {}
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked[msg.value()] = msg.partition()  # type: ignore[attr-defined]
        else:
            errors.append(err)

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 90000})
    produced: list[bytes] = []
    unacked_at_kill: set[bytes] = set()
    after_kill: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        v = b"r%d" % len(produced)
        p.produce(TOPIC, value=v, key=v, partition=len(produced) % PARTITIONS,
                  on_delivery=report)
        produced.append(v)
        if unacked_at_kill:
            after_kill.append(v)
        elif len(acked) >= 400 and len(produced) % PARTITIONS == 1:  # v is partition 0's
            unacked_at_kill = {x for i, x in enumerate(produced)
                               if i % PARTITIONS == 0 and x not in acked}
            assert v in unacked_at_kill  # its delivery report has not been served yet
            cluster.nodes[victim].kill()
        p.poll(0)
        while len(p) > 200:  # a bounded window of records in flight
            p.poll(0.01)
        if (unacked_at_kill and len(after_kill) >= 400
                and sum(acked.get(x) == 0 for x in after_kill) >= 50):
            break  # records produced after the kill went through partition 0's new leader
    assert p.flush(90) == 0
    assert not errors, errors
    assert unacked_at_kill <= acked.keys()
    assert set(produced) == acked.keys()
    owner, new_epoch = leases(cluster.dsn)[(TOPIC, 0)]
    assert owner != victim and new_epoch > epoch
    seen = read_all(cluster.bootstrap)
    assert len(seen) == len(set(seen))  # none twice
    assert set(seen) == acked.keys()  # none lost


def _raw_produce(value: bytes, correlation: int) -> bytes:
    """An acks=all Produce v9 of one record to partition 0, encoded."""
    return encode_request(0, 9, correlation, "paused-test", ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(
            PartitionProduceData(index=0, records=make_batch([(value, value)])),)),)))


def _answer(client: WireClient, correlation: int) -> ErrorCode | None:
    """The error code of a raw Produce's answer; None when the node closed the connection
    instead (nothing was acknowledged)."""
    try:
        cid, response = decode_response(client.read_frame(), 0, 9)
    except (ConnectionError, OSError):
        return None
    assert cid == correlation
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def test_paused_leader_cannot_write_after_losing_its_lease(tmp_path: Path, pg_dsn: str) -> None:
    """Partition 0's leader is SIGSTOPped with a Produce just sent to it and another in its
    socket buffer; the others take its leases over once its registration expires (a 3 s
    TTL) and go on. When it resumes, the queued write is refused (its epoch is fenced), it
    gives its leases up, and partition 0 holds exactly the acknowledged records, at
    contiguous offsets."""
    with three_nodes(tmp_path, pg_dsn, {"cluster.lease.ttl.ms": "3000"}) as cluster:
        _paused_leader(cluster)


def _paused_leader(cluster: Cluster) -> None:
    victim, epoch = leases(cluster.dsn)[(TOPIC, 0)]
    acked: set[bytes] = set()
    produce(cluster.bootstrap, [b"o%d" % i for i in range(100)], acked)
    client = WireClient(cluster.nodes[victim].bootstrap, timeout=60)
    client.send_raw(_raw_produce(b"racing", 1))  # may or may not be written before the stop
    cluster.nodes[victim].pause()
    try:
        client.send_raw(_raw_produce(b"queued", 2))  # waits in the stopped node's socket
        wait_until(lambda: leases(cluster.dsn)[(TOPIC, 0)][1] > epoch, 30, "a takeover")
        others = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != victim)
        produce(others, [b"p%d" % i for i in range(100)], acked)
        assert leases(cluster.dsn)[(TOPIC, 0)][0] != victim
    finally:
        cluster.nodes[victim].resume()
    racing = _answer(client, 1)
    if racing == ErrorCode.none:
        acked.add(b"racing")
    queued = _answer(client, 2)
    client.close()
    assert queued != ErrorCode.none  # the stale leader acknowledged nothing
    wait_until(lambda: "giving up" in cluster.nodes[victim].log_path.read_text()
               or "lost the lease" in cluster.nodes[victim].log_path.read_text(), 20,
               "the resumed node to give its leases up")
    assert leases(cluster.dsn)[(TOPIC, 0)][1] > epoch  # (it may lead again, by a hand-off)
    # The log holds each acknowledged record once, in contiguous batches, nothing else.
    rows = query(cluster.dsn, "SELECT p.idx, b.base_offset, b.last_offset, b.data "
                 "FROM samsa_batches b JOIN samsa_partitions p USING (pid) WHERE p.topic = $1 "
                 "ORDER BY p.idx, b.base_offset", TOPIC)
    expected_next: dict[int, int] = {}
    values = []
    for r in rows:
        assert r["base_offset"] == expected_next.get(r["idx"], 0)
        expected_next[r["idx"]] = r["last_offset"] + 1
        values += [v for b in decode_batches(bytes(r["data"])) for *_, v, _ in b.records]
    assert sorted(values) == sorted(acked)


TRANSIENT = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT}
"""librdkafka's local errors for a closed connection or a request timing out: retried."""


def retriable(e: KafkaError) -> bool:
    return not e.fatal() and (e.retriable() or e.code() in TRANSIENT)


class Traffic:
    """An acks=all idempotent producer and a group of two consumers, each in a thread,
    recording every acknowledged and consumed value and every error the clients report."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap, self.group = bootstrap, group
        self.acked: set[bytes] = set()
        self.got: set[bytes] = set()
        self.failed: list[KafkaError] = []
        """Delivery reports of records not acknowledged."""
        self.errors: list[KafkaError] = []
        """error_cb calls and consumer errors."""
        self.producing, self.consuming = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._produce)]
        self.threads += [threading.Thread(target=self._consume) for _ in range(2)]

    def __enter__(self) -> Traffic:
        self.producing.set()
        self.consuming.set()
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.producing.clear()
        self.consuming.clear()
        for t in self.threads:
            t.join(120)

    def _error(self, e: KafkaError) -> None:
        with self.lock:
            self.errors.append(e)

    def _produce(self) -> None:
        def report(err: KafkaError | None, msg: object) -> None:
            with self.lock:
                if err is None:
                    self.acked.add(msg.value())  # type: ignore[attr-defined]
                else:
                    self.failed.append(err)

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 90000, "error_cb": self._error})
        n = 0
        while self.producing.is_set():
            p.produce(TOPIC, value=b"t%d" % n, on_delivery=report)
            n += 1
            p.poll(0.002)
            while len(p) > 100:
                p.poll(0.01)
        p.flush(90)

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                      "error_cb": self._error})
        c.subscribe([TOPIC])
        while self.consuming.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                self._error(m.error())
                continue
            with self.lock:
                self.got.add(m.value())
        c.close()

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def all_consumed(self) -> bool:
        with self.lock:
            return self.got >= self.acked


def test_joining_node_takes_a_share_and_clean_shutdown_hands_over(tmp_path: Path,
                                                                  pg_dsn: str) -> None:
    """A third node takes a share of every kind of lease; stopping it cleanly hands them
    back while a producer and a consumer group (coordinated by that node) run: they see
    retriable errors at most, and every acknowledged record is consumed."""
    # A long TTL: leases can only move this fast by hand-off, never by expiry.
    c = Cluster(tmp_path, pg_dsn, {"cluster.lease.ttl.ms": "60000"})
    try:
        c.start(1)
        c.start(2)
        create_topic(c.bootstrap, 6)
        c.settled()
        c.start(3)
        wait_until(lambda: sum(o == 3 for (t, _), (o, _) in leases(pg_dsn).items()
                               if t == TOPIC) >= 1
                   and sum(o == 3 for (t, _), (o, _) in leases(pg_dsn).items()
                           if t == OFFSETS) >= 1, 20, "node 3 taking a share")
        c.settled()
        group = next(g for g in (f"g{i}" for i in range(100))
                     if c.owner(OFFSETS, partition_for(g, 6)) == 3)
        with Traffic(c.bootstrap, group) as traffic:
            wait_until(lambda: len(traffic.got) >= 100, 60, "records flowing")
            assert c.nodes[3].stop() == 0
            wait_until(lambda: all_owned(pg_dsn, {1, 2}), 20, "node 3's leases handed over")
            moved = traffic.count()
            wait_until(lambda: traffic.count() >= moved + 300, 60, "records acknowledged after")
            traffic.producing.clear()
            traffic.threads[0].join(120)
            wait_until(traffic.all_consumed, 60, "every acknowledged record consumed")
        assert not traffic.failed, traffic.failed
        assert all(retriable(e) for e in traffic.errors), traffic.errors
        assert set(read_all(c.bootstrap, 6)) == traffic.acked
    finally:
        c.stop()


def test_node_restarted_with_its_id_takes_its_leases_back(tmp_path: Path, pg_dsn: str) -> None:
    """A SIGKILLed node restarted at once (well within the TTL) finds leases in its name
    from its former life and takes them with a new epoch; nothing written is lost."""
    c = Cluster(tmp_path, pg_dsn, {"cluster.lease.ttl.ms": "60000"})
    try:
        c.start(1)
        c.start(2)
        create_topic(c.bootstrap, PARTITIONS)
        c.settled()
        acked: set[bytes] = set()
        produce(c.bootstrap, [b"s%d" % i for i in range(200)], acked)
        before = {k: v for k, v in leases(pg_dsn).items() if v[0] == 2}
        assert before
        c.nodes[2].kill()
        c.start(2)
        wait_until(lambda: all(leases(pg_dsn)[k][0] == 2 and leases(pg_dsn)[k][1] > e
                               for k, (_, e) in before.items()), 20, "leases taken back")
        produce(c.bootstrap, [b"t%d" % i for i in range(200)], acked)
        reader = consumer(c.bootstrap, "after-restart")
        reader.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: set[bytes] = set()
        deadline = time.monotonic() + 30
        while got != acked and time.monotonic() < deadline:
            m = reader.poll(0.5)
            if m is not None and not m.error():
                got.add(m.value())
        reader.close()
        assert got == acked
    finally:
        c.stop()
