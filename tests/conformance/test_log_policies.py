"""Topic log policies seen through real clients: LogAppendTime, retention, compaction,
long-polling fetches and acks=0."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from tests.brokerproc import BrokerProcess
from tests.records import make_batch
from tests.wire import WireClient

pytestmark = pytest.mark.conformance


def _consume(bootstrap: str, topic: str, want: int, timeout: float = 15.0) -> list:  # type: ignore[type-arg]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list = []  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += [m for m in c.consume(1000, timeout=0.3) if not m.error()]
    c.close()
    return out


def test_log_append_time(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lat", 1, config={"message.timestamp.type": "LogAppendTime"})])[
        "lat"].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    before = int(time.time() * 1000)
    p.produce("lat", value=b"old", timestamp=1_000_000)
    assert p.flush(10) == 0
    (msg,) = _consume(broker.bootstrap, "lat", 1)
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before - 5000 <= ts <= int(time.time() * 1000) + 5000


def test_retention_and_compaction(fresh_broker: BrokerProcess) -> None:
    fresh_broker.config["log.retention.check.interval.ms"] = "100"
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    fs = admin.create_topics([
        NewTopic("short", 1, config={"retention.ms": "500", "segment.bytes": "4096"}),
        NewTopic("compacted", 1, config={"cleanup.policy": "compact", "segment.bytes": "4096",
                                         "min.cleanable.dirty.ratio": "0.01",
                                         "delete.retention.ms": "100"}),
    ])
    for f in fs.values():
        f.result(15)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "linger.ms": 0,
                  "batch.size": 1500})
    errors: list[object] = []
    for i in range(200):
        p.produce("short", value=b"x" * 100, on_delivery=lambda e, m: e and errors.append(e))
        p.produce("compacted", key=f"k{i % 10}".encode(), value=f"{i:0100d}".encode(),
                  on_delivery=lambda e, m: e and errors.append(e))
        p.poll(0)
    assert p.flush(10) == 0
    assert errors == []

    tp = TopicPartition("short", 0)
    deadline = time.monotonic() + 15
    start = 0
    while time.monotonic() < deadline:
        start = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset
        if start > 0:
            break
        time.sleep(0.2)
    assert start > 0, "retention never advanced the log start offset"
    end = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset
    assert end == 200
    remaining = _consume(fresh_broker.bootstrap, "short", end - start)
    assert [m.offset() for m in remaining] == list(range(start, end))

    deadline = time.monotonic() + 15
    got: list = []  # type: ignore[type-arg]
    while time.monotonic() < deadline:
        got = _consume(fresh_broker.bootstrap, "compacted", 200, timeout=2)
        if len(got) < 200:
            break
        time.sleep(0.3)
    assert 10 <= len(got) < 200, "compaction removed nothing"
    offsets = [m.offset() for m in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    latest: dict[bytes, bytes] = {}
    for m in got:
        latest[m.key()] = m.value()
    assert latest == {f"k{k}".encode(): f"{190 + k:0100d}".encode() for k in range(10)}


def test_fetch_long_poll_wakes_on_produce(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("longpoll", 1)])["longpoll"].result(15)

    def fetch(wait_ms: int) -> object:
        c = WireClient(broker.bootstrap, timeout=30)
        req = FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
            max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(FetchTopic(topic="longpoll", partitions=(FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=(), rack_id="")
        try:
            return c.call(1, 12, req)
        finally:
            c.close()

    empty = fetch(100)
    assert empty.responses[0].partitions[0].records in (b"", None)  # type: ignore[attr-defined]

    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(fetch(20_000)))
    t.start()
    time.sleep(0.3)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("longpoll", value=b"wake")
    assert p.flush(10) == 0
    t.join(15)
    assert not t.is_alive(), "fetch did not wake up on produce"
    part = result[0].responses[0].partitions[0]  # type: ignore[attr-defined]
    assert part.high_watermark == 1 and len(part.records) > 0


def test_acks_zero(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("acks0", 1)])["acks0"].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": 0})
    for i in range(100):
        p.produce("acks0", value=str(i).encode())
    assert p.flush(10) == 0
    got = _consume(broker.bootstrap, "acks0", 100)
    assert [m.value() for m in got] == [str(i).encode() for i in range(100)]


def test_raw_batch_offsets(broker: BrokerProcess) -> None:
    """Batches are stored as sent with only the base offset patched."""
    from kio.schema.produce.v9.request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("rawb", 1)])["rawb"].result(15)
    c = WireClient(broker.bootstrap)
    batch = make_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    offsets = []
    for _ in range(3):
        r = c.call(0, 9, ProduceRequest(
            transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
            topic_data=(TopicProduceData(name="rawb", partition_data=(
                PartitionProduceData(index=0, records=batch),)),)))
        offsets.append(r.responses[0].partition_responses[0].base_offset)
    c.close()
    assert offsets == [0, 3, 6]
    got = _consume(broker.bootstrap, "rawb", 9)
    assert [(m.offset(), m.key()) for m in got] == [
        (o, k) for o in range(9) for k in [(b"a", b"b", b"c")[o % 3]]]


def test_compaction_runs_beside_serving(fresh_broker: BrokerProcess) -> None:
    """Rewriting a large compacted segment must not stop the broker from answering."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    fresh_broker.config["log.retention.check.interval.ms"] = "200"
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("big-compacted", 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(8 << 20),
        "min.cleanable.dirty.ratio": "0.01"})])["big-compacted"].result(15)
    p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "acks": "all", "linger.ms": 5})
    value = b"v" * 100
    for i in range(400_000):  # ~50 MB: several seconds of cleaning
        while True:
            try:
                p.produce("big-compacted", key=b"k%d" % (i % 1000), value=value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    partition_dir = fresh_broker.data_dir / "big-compacted-0"
    client = WireClient(fresh_broker.bootstrap)
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    answered_while_cleaning = 0
    deadline = time.monotonic() + 60
    while answered_while_cleaning < 3 and time.monotonic() < deadline:
        cleaning = bool(list(partition_dir.glob("*.cleaned")))
        client.call(18, 3, request)
        # Counted only if a .cleaned file existed before the request and still does after
        # the answer: with compaction on the event loop that cannot happen.
        if cleaning and list(partition_dir.glob("*.cleaned")):
            answered_while_cleaning += 1
        if not cleaning:
            time.sleep(0.01)
    client.close()
    assert answered_while_cleaning >= 3, "no request was answered while compaction ran"
    got = _consume(fresh_broker.bootstrap, "big-compacted", 1000, timeout=20)
    assert len({m.key() for m in got}) == 1000  # every key survives compaction
