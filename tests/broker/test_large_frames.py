"""Requests larger than the connection's receive buffer arrive whole, pipelined or not."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from samsa.protocol.codec import decode_response, encode_request
from tests.brokerproc import BrokerProcess
from tests.records import make_batch
from tests.wire import WireClient

SIZES = [10, 65_000, 65_536, 70_000, 300_000, 900_000]


def _produce(topic: str, value: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=make_batch([(b"k", value)])),)),))


def test_large_requests_one_by_one_and_pipelined(broker: BrokerProcess) -> None:
    topic = "large-" + uuid.uuid4().hex[:8]
    c = WireClient(broker.bootstrap, timeout=30)
    c.call(3, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                                  allow_auto_topic_creation=True,
                                  include_topic_authorized_operations=False))
    for n in SIZES:  # one at a time
        r = c.call(0, 9, _produce(topic, bytes([n % 251]) * n))
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    # all at once in one write: frames straddle reads and the receive buffer
    frames = [encode_request(0, 9, 100 + i, "t", _produce(topic, bytes([i]) * n))
              for i, n in enumerate(SIZES)]
    c.send_raw(b"".join(frames))
    offsets = []
    for i in range(len(SIZES)):
        cid, r = decode_response(c.read_frame(), 0, 9)
        assert cid == 100 + i
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
        offsets.append(r.responses[0].partition_responses[0].base_offset)
    assert offsets == list(range(len(SIZES), 2 * len(SIZES)))
    # read everything back: the last record is the 900 KB one, intact
    fetched = c.call(1, 12, FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
        max_bytes=8 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=2 * len(SIZES) - 1,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=8 << 20),)),),
        forgotten_topics_data=(), rack_id=""))
    records = fetched.responses[0].partitions[0].records
    assert bytes([len(SIZES) - 1]) * SIZES[-1] in records
    c.close()
