"""kill -9 the broker under an acks=all idempotent producer: no acked record lost or doubled."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

TOPIC = "crash"
PARTITIONS = 3
MAX_RECORDS = 30_000
KILLS = 4


def test_sigkill_loses_no_acknowledged_record(fresh_broker: BrokerProcess) -> None:
    rng = random.Random(1234)
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)])[TOPIC].result(15)

    producer = Producer({
        "bootstrap.servers": fresh_broker.bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 2, "message.timeout.ms": 120_000, "reconnect.backoff.max.ms": 200,
        "retry.backoff.ms": 50,
    })
    acked: list[int] = []
    failed: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append(int(msg.value()))  # type: ignore[attr-defined]
        else:
            failed.append(err)

    stop = threading.Event()

    def produce_loop() -> None:
        for i in range(MAX_RECORDS):
            if stop.is_set():
                return
            while True:
                try:
                    producer.produce(TOPIC, key=str(i % 97).encode(), value=str(i).encode(),
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if i % 200 == 0:
                time.sleep(0.01)  # bounded rate: the loop spans the kills

    t = threading.Thread(target=produce_loop)
    t.start()
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.8, 2.0))
        fresh_broker.kill()
        time.sleep(rng.uniform(0.05, 0.3))
        fresh_broker.start()
    time.sleep(1.0)
    stop.set()
    t.join(60)
    assert producer.flush(90) == 0
    assert failed == []
    assert len(acked) > 1000

    consumer = Consumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": "crash-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: Counter[int] = Counter()
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while len(eof) < PARTITIONS and time.monotonic() < deadline:
        for m in consumer.consume(1000, timeout=0.5):
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF
                eof.add(m.partition())
                continue
            seen[int(m.value())] += 1
    consumer.close()
    assert len(eof) == PARTITIONS
    doubled = [v for v, n in seen.items() if n > 1]
    assert doubled == []
    missing = set(acked) - set(seen)
    assert missing == set()
    assert fresh_broker.stop() == 0
