"""Apache Kafka's Java producer and consumer against samsa: an idempotent producer per codec
(none, gzip, snappy, lz4, zstd); the Java consumer and librdkafka read every record back
(keys, values, headers, order), and the Java consumer reads librdkafka's batches of each
codec too."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, unique
from tests.conformance.javakit import Event, JavaKit

pytestmark = pytest.mark.conformance

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTS = 3
COUNT = 300




def _record(e: Event) -> tuple[Any, ...]:
    return (e["topic"], e["partition"], e["offset"], e["key"], e["value"],
            tuple(tuple(h) for h in e["headers"]))


def _by_partition(events: list[Event]) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    out: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    for e in events:
        out.setdefault((e["topic"], e["partition"]), []).append(_record(e))
    return out


def _text(b: str | bytes | None) -> str | None:
    return b.decode() if isinstance(b, bytes) else b


def _librdkafka_read(bootstrap: str, topic: str, total: int) -> list[Event]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rd"),
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
    out: list[Event] = []
    try:
        for _ in range(300):
            for m in c.consume(500, timeout=0.2):
                assert m.error() is None, m.error()
                out.append({"topic": m.topic(), "partition": m.partition(),
                            "offset": m.offset(), "key": _text(m.key()),
                            "value": _text(m.value()),
                            "headers": [[k, _text(v)] for k, v in m.headers() or []]})
            if len(out) >= total:
                break
    finally:
        c.close()
    return out


def _librdkafka_produce(bootstrap: str, topic: str, codec: str) -> list[tuple[Any, ...]]:
    """Records like the Java driver's, by librdkafka; returns (partition, key, value,
    headers) in send order."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "compression.codec": codec, "linger.ms": 20})
    sent = []
    for i in range(COUNT):
        key = None if i % 7 == 6 else f"rd-key-{i}"
        value = f"rd-{codec}-{i}-" + "xyz" * (i % 40)
        headers: list[tuple[str, str | bytes | None]] = (
            [("idx", str(i).encode())] if i % 2 else [])
        p.produce(topic, value=value.encode(), key=None if key is None else key.encode(),
                  partition=i % PARTS, headers=headers)
        sent.append((i % PARTS, key, value,
                     tuple((k, _text(v)) for k, v in headers)))
    assert p.flush(30) == 0
    return sent


def test_codecs_round_trip(broker: BrokerProcess, java: JavaKit) -> None:
    base = unique("jp")
    java_topics = {codec: f"{base}-{codec}" for codec in CODECS}
    rd_topics = {codec: f"{base}-rd-{codec}" for codec in CODECS}
    for t in [*java_topics.values(), *rd_topics.values()]:
        create_topic(broker.bootstrap, t, PARTS)

    events = java.run("Produce", broker.bootstrap, str(COUNT),
                      *(f"{t}:{codec}:{PARTS}" for codec, t in java_topics.items()))
    assert events[-1]["event"] == "done", events[-3:]
    sent = [e for e in events if e["event"] == "sent"]
    assert len(sent) == COUNT * len(CODECS)
    sent_by_tp = _by_partition(sent)
    for tp, records in sent_by_tp.items():
        # Idempotent sends keep their order: the broker's offsets are 0, 1, 2, ... in
        # send order on every partition.
        assert [r[2] for r in records] == list(range(len(records))), tp

    rd_sent = {codec: _librdkafka_produce(broker.bootstrap, t, codec)
               for codec, t in rd_topics.items()}

    read = java.run("ReadAll", broker.bootstrap, *java_topics.values(), *rd_topics.values(),
                    "max.partition.fetch.bytes=4096")
    assert read[-1]["event"] == "done", read[-3:]
    got = _by_partition([e for e in read if e["event"] == "record"])

    # Java -> samsa -> Java: every record, field by field, in offset order.
    for tp, records in sent_by_tp.items():
        assert got[tp] == records, tp
    # librdkafka -> samsa -> Java.
    for codec, t in rd_topics.items():
        for part in range(PARTS):
            expect = [(r[1], r[2], r[3]) for r in rd_sent[codec] if r[0] == part]
            records = got[(t, part)]
            assert [r[2] for r in records] == list(range(len(expect))), (t, part)
            assert [(r[3], r[4], r[5]) for r in records] == expect, (t, part)
    # Java -> samsa -> librdkafka.
    for t in java_topics.values():
        rd = _by_partition(_librdkafka_read(broker.bootstrap, t, COUNT))
        for part in range(PARTS):
            assert rd[(t, part)] == sent_by_tp[(t, part)], (t, part)
