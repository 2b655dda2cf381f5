"""Kafka's record validation on produce, seen by librdkafka and on the wire: keyless records
on compacted topics, timestamp limits and message size give Kafka's errors (per record where
Produce v8+ carries them), a refused batch stores nothing, and the broker keeps serving."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)
from kio.schema.produce.v7.request import PartitionProduceData as PartitionV7
from kio.schema.produce.v7.request import ProduceRequest as ProduceV7
from kio.schema.produce.v7.request import TopicProduceData as TopicV7
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from samsa.protocol.records import ProducerRecordData, encode_batch
from tests.brokerproc import BrokerProcess
from tests.wire import WireClient

pytestmark = pytest.mark.conformance


def _topic(broker: BrokerProcess, configs: dict[str, str]) -> str:
    name = f"val-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, config=configs)])[name].result(15)
    return name


def _end_offset(broker: BrokerProcess, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    offset: int = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset
    return offset


def _send(broker: BrokerProcess, topic: str, records: list[dict[str, Any]],
          **config: Any) -> list[KafkaError | None]:
    """Produce ``records`` (produce() keyword arguments) in one librdkafka batch; the
    delivery error of each, in order."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2000,
                  "batch.num.messages": 10_000, **config})
    errors: list[KafkaError | None] = [None] * len(records)

    def report(i: int) -> Any:
        return lambda err, msg: errors.__setitem__(i, err)

    for i, r in enumerate(records):
        p.produce(topic, partition=0, on_delivery=report(i), **r)
    assert p.flush(20) == 0
    return errors


def test_librdkafka_keyless_records_on_compacted_topic(broker: BrokerProcess) -> None:
    topic = _topic(broker, {"cleanup.policy": "compact"})
    keyless = set(range(0, 100, 10))
    records = [{"key": None if i in keyless else f"k{i}".encode(), "value": b"v"}
               for i in range(100)]
    errors = _send(broker, topic, records)
    assert {i for i, e in enumerate(errors) if e and e.code() == KafkaError.INVALID_RECORD} == \
        keyless
    assert all(e is not None and e.code() == KafkaError._INVALID_DIFFERENT_RECORD
               for i, e in enumerate(errors) if i not in keyless)
    assert _end_offset(broker, topic) == 0  # nothing of the batch was stored

    errors = _send(broker, topic, [{"key": b"k", "value": b"v"}] * 3)
    assert errors == [None] * 3
    assert _end_offset(broker, topic) == 3


def test_librdkafka_timestamp_limits(broker: BrokerProcess) -> None:
    topic = _topic(broker, {"message.timestamp.before.max.ms": "3600000",
                            "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    stamps = [now, now - 7_200_000, now + 600_000, now - 60_000]
    errors = _send(broker, topic, [{"value": b"v", "timestamp": t} for t in stamps])
    # librdkafka reports the records named in record_errors as INVALID_RECORD whatever the
    # partition's error; the wire shows INVALID_TIMESTAMP below
    assert [e.code() if e else None for e in errors] == [
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
        KafkaError.INVALID_RECORD, KafkaError._INVALID_DIFFERENT_RECORD]
    assert _end_offset(broker, topic) == 0
    assert _send(broker, topic, [{"value": b"v", "timestamp": now - 60_000}]) == [None]

    batch = encode_batch([ProducerRecordData(t, b"k", b"v", []) for t in stamps])
    part = _produce_v9(broker, topic, batch)
    assert part.error_code == KafkaError.INVALID_TIMESTAMP
    assert part.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [r.batch_index for r in part.record_errors] == [1, 2]
    assert "is out of range" in part.record_errors[0].batch_index_error_message
    assert _end_offset(broker, topic) == 1


def test_librdkafka_message_size_limit_changes_at_run_time(broker: BrokerProcess) -> None:
    topic = _topic(broker, {"max.message.bytes": "1000"})
    big = {"key": b"k", "value": b"x" * 5000}
    [error] = _send(broker, topic, [big], **{"linger.ms": 0})
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "10000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    assert _send(broker, topic, [big], **{"linger.ms": 0}) == [None]
    assert _end_offset(broker, topic) == 1


def _mixed(compression: int) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([ProducerRecordData(now, None if i in (1, 4) else b"k", b"v", [])
                         for i in range(6)], compression=compression)


def _produce_v9(broker: BrokerProcess, topic: str, batch: bytes) -> Any:
    client = WireClient(broker.bootstrap)
    try:
        resp = client.call(0, 9, ProduceRequest(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=0, records=batch),)),)))
    finally:
        client.close()
    return resp.responses[0].partition_responses[0]


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4],
                         ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_record_errors_on_the_wire(broker: BrokerProcess, compression: int) -> None:
    topic = _topic(broker, {"cleanup.policy": "compact"})
    part = _produce_v9(broker, topic, _mixed(compression))
    assert part.error_code == KafkaError.INVALID_RECORD
    assert [(r.batch_index, r.batch_index_error_message) for r in part.record_errors] == [
        (i, f"Compacted topic cannot accept message without key in topic partition "
            f"{topic}-0") for i in (1, 4)]
    assert part.error_message.startswith("One or more records have been rejected due to 2")
    assert part.base_offset == -1

    client = WireClient(broker.bootstrap)
    try:  # Produce v7 has no per-record errors: the partition error alone
        resp = client.call(0, 7, ProduceV7(
            transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10),
            topic_data=(TopicV7(name=topic, partition_data=(
                PartitionV7(index=0, records=_mixed(compression)),)),)))
        assert resp.responses[0].partition_responses[0].error_code == KafkaError.INVALID_RECORD
    finally:
        client.close()
    assert _end_offset(broker, topic) == 0


def test_delete_policy_topics_take_keyless_records(broker: BrokerProcess) -> None:
    topic = _topic(broker, {})
    errors = _send(broker, topic, [{"value": b"v"}, {"key": b"k", "value": b"v"}])
    assert errors == [None, None]
    assert _end_offset(broker, topic) == 2
