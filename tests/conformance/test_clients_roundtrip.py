"""Produce and consume with real third-party clients over TCP (manual assignment)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.conformance

N = 2000


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions)])
    futures[name].result(timeout=15)


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int,
                 timeout: float = 30.0) -> list[tuple[int, int, bytes | None, bytes, list]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-manual",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    import time

    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for m in c.consume(500, timeout=0.5):
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or []))
    c.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_codecs_roundtrip(broker: BrokerProcess, codec: str) -> None:
    topic = _topic(f"codec-{codec}")
    _create(broker.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 5, "acks": "all"})
    acked: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(N):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}-".encode() * 5,
                  headers=[("h", str(i).encode())], on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(30) == 0
    assert len(acked) == N
    got = _consume_all(broker.bootstrap, topic, 3, N)
    assert len(got) == N
    by_key = {k: (v, h) for _, _, k, v, h in got}
    assert len(by_key) == N
    for i in range(N):
        v, h = by_key[f"k{i}".encode()]
        assert v == f"value-{i}-".encode() * 5
        assert h == [("h", str(i).encode())]
    # offsets per partition are dense and match what the producer was told
    assert sorted(acked) == sorted((pt, off) for pt, off, *_ in got)


def test_confluent_idempotent_producer(broker: BrokerProcess) -> None:
    topic = _topic("idem")
    _create(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "linger.ms": 2})
    errors: list[object] = []
    for i in range(N):
        p.produce(topic, key=str(i % 10).encode(), value=str(i).encode(),
                  on_delivery=lambda e, m: errors.append(e) if e else None)
        p.poll(0)
    assert p.flush(30) == 0
    assert errors == []
    got = _consume_all(broker.bootstrap, topic, 2, N)
    assert sorted(int(v) for *_, v, _ in got) == list(range(N))
    # per key, order preserved
    for key in range(10):
        vals = [int(v) for _, _, k, v, _ in sorted(got) if k == str(key).encode()]
        assert vals == sorted(vals)


def test_kafka_python_producer_consumer(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = _topic("kpy")
    _create(broker.bootstrap, topic, 2)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                         compression_type="gzip")
    futures = [prod.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
               for i in range(500)]
    prod.flush(30)
    metas = [f.get(timeout=10) for f in futures]
    prod.close()
    assert sorted((m.partition, m.offset) for m in metas) == sorted(
        [(0, o) for o in range(250)] + [(1, o) for o in range(250)]
    )
    cons = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest", consumer_timeout_ms=5000)
    cons.assign([KTP(topic, 0), KTP(topic, 1)])
    got = {}
    for msg in cons:
        got[msg.key] = msg.value
        if len(got) == 500:
            break
    cons.close()
    assert got == {f"k{i}".encode(): f"v{i}".encode() for i in range(500)}


def test_aiokafka_producer_consumer(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    topic = _topic("aio")
    _create(broker.bootstrap, topic, 3)

    async def run() -> dict[bytes, bytes]:
        prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                                compression_type="lz4")
        await prod.start()
        try:
            for i in range(600):
                await prod.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
            await prod.flush()
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
        await cons.start()
        got: dict[bytes, bytes] = {}
        try:
            cons.assign([ATP(topic, p) for p in range(3)])
            await cons.seek_to_beginning()
            async with asyncio.timeout(20):
                while len(got) < 600:
                    batch = await cons.getmany(timeout_ms=500)
                    for msgs in batch.values():
                        for m in msgs:
                            got[m.key] = m.value
        finally:
            await cons.stop()
        return got

    got = asyncio.run(run())
    assert got == {f"k{i}".encode(): f"v{i}".encode() for i in range(600)}
