"""Fetch across several topics with real clients. librdkafka starts each fetch request at
the partition after the last one it fetched, so a topic can stand twice in one request
(t2 p3, t0 p0-3, t1 p0-3, t2 p0-2). The broker closed such connections ("placeholder 11
missing from the encoded response"); every record must arrive and nothing may fail."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, produce, unique, wait_until

pytestmark = pytest.mark.conformance


def test_growing_subscription_consumes_every_topic(broker: BrokerProcess) -> None:
    topics = [unique(f"ft{i}") for i in range(3)]
    expected: set[bytes] = set()
    for t in topics:
        create_topic(broker.bootstrap, t, 4)
        for round_ in range(6):  # six batches a partition: many fetches with data
            expected |= produce(broker.bootstrap, t, 4, 10, tag=f"r{round_}-")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                  "partition.assignment.strategy": "range", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "max.partition.fetch.bytes": 400})
    seen: set[bytes] = set()
    try:
        c.subscribe(topics[:1])
        c.subscribe(topics[:2])
        c.subscribe(topics)

        def everything() -> bool:
            for m in c.consume(500, timeout=0.2):
                if m.error() is None:
                    seen.add(m.value())
            return seen >= expected

        wait_until(everything, timeout=45, what="every record of the three topics")
    finally:
        c.close()
    assert seen == expected
    text = broker.log_path.read_text()
    assert "handler failed" not in text
