"""Bad input gets Kafka's error code or a closed connection; the broker keeps serving."""

from __future__ import annotations

import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from samsa.protocol.codec import decode_response, encode_request
from tests.brokerproc import BrokerProcess
from tests.records import make_batch
from tests.wire import WireClient


def _metadata(client: WireClient, *names: str) -> object:
    topics = tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names)
    return client.call(3, 12, MetadataRequest(topics=topics, allow_auto_topic_creation=True,
                                              include_topic_authorized_operations=False))


def _still_serving(bootstrap: str) -> None:
    c = WireClient(bootstrap)
    try:
        resp = c.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
        assert resp.brokers[0].node_id == 0
    finally:
        c.close()


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xff\xff\xff",  # negative size
        struct.pack(">i", 200 * 1024 * 1024),  # beyond socket.request.max.bytes
        struct.pack(">i", 3) + b"abc",  # shorter than any header
        struct.pack(">i", 12) + b"\x00\x03\x00\x0c" + b"\x00\x00\x00\x01" + b"\xff\xff\xff\xff",
        struct.pack(">i", 10) + b"\x27\x10\x00\x00\x00\x00\x00\x01\x00\x00",  # api key 10000
        struct.pack(">i", 10) + b"\x00\x03\x00\x63\x00\x00\x00\x01\x00\x00",  # Metadata v99
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
    ids=["negative", "oversized", "short", "malformed-body", "unknown-key", "bad-version",
         "http"],
)
def test_garbage_closes_connection(broker: BrokerProcess, payload: bytes) -> None:
    c = WireClient(broker.bootstrap)
    c.send_raw(payload)
    assert c.is_closed()
    c.close()
    _still_serving(broker.bootstrap)


def test_truncated_frame_then_disconnect(broker: BrokerProcess) -> None:
    c = WireClient(broker.bootstrap)
    c.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x0c")
    c.close()
    _still_serving(broker.bootstrap)


def test_unsupported_api_versions_version_gets_v0_answer(broker: BrokerProcess) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from samsa.broker.handlers import api_versions

    c = WireClient(broker.bootstrap)
    frame = bytearray(encode_request(18, 3, 7, "x", ApiVersionsRequest(
        client_software_name="t", client_software_version="1")))
    struct.pack_into(">h", frame, 6, 99)  # claim version 99
    c.send_raw(bytes(frame))
    cid, resp = decode_response(c.read_frame(), 18, 0)
    assert cid == 7
    assert resp.error_code == ErrorCode.unsupported_version
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[18] == api_versions.VERSIONS
    assert resp.api_keys and not hasattr(resp, "supported_features")  # a v0 body
    c.close()


def test_invalid_and_unknown_topics(broker: BrokerProcess) -> None:
    c = WireClient(broker.bootstrap)
    resp = _metadata(c, "bad name!", "a" * 250, "..")
    assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_topic_exception] * 3
    resp = c.call(3, 12, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="never-" + uuid.uuid4().hex),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    c.close()


def _produce(c: WireClient, topic: str, records: bytes, partition: int = 0) -> object:
    req = ProduceRequest(transactional_id=None, acks=-1, timeout=_td(5000), topic_data=(
        TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=records),)),))
    return c.call(0, 9, req)


def _td(ms: int) -> object:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def test_corrupt_batch_rejected_and_data_intact(broker: BrokerProcess) -> None:
    topic = "corrupt-" + uuid.uuid4().hex[:8]
    c = WireClient(broker.bootstrap)
    _metadata(c, topic)  # auto-create
    good = make_batch([(b"k", b"v1"), (b"k", b"v2")])
    r = _produce(c, topic, good)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    bad = bytearray(make_batch([(b"k", b"evil")]))
    bad[-1] ^= 0xFF  # break the CRC
    r = _produce(c, topic, bytes(bad))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
    r = _produce(c, topic, good[:30])  # truncated batch
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
    r = _produce(c, topic, good + good)  # two batches in one partition's records
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record
    r = _produce(c, topic, good, partition=7)  # partition out of range
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
    r = _produce(c, "__consumer_offsets", good)
    assert r.responses[0].partition_responses[0].error_code in (
        ErrorCode.invalid_topic_exception, ErrorCode.unknown_topic_or_partition)
    # the one good batch is all there is
    r = _produce(c, topic, good)
    assert r.responses[0].partition_responses[0].base_offset == 2
    c.close()


def test_bad_acks(broker: BrokerProcess) -> None:
    topic = "acks-" + uuid.uuid4().hex[:8]
    c = WireClient(broker.bootstrap)
    _metadata(c, topic)
    req = ProduceRequest(transactional_id=None, acks=2, timeout=_td(1000), topic_data=(
        TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=make_batch([(None, b"x")])),)),))
    r = c.call(0, 9, req)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks
    c.close()
