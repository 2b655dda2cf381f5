"""Every version of CreateTopics, CreatePartitions, DeleteTopics, InitProducerId and
DescribeCluster, over TCP with raw requests.

The handlers build their answers typed, as the newest version they serve; the broker
converts them to the version asked. Each version must decode and carry the same facts.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa.broker.handlers import (
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    init_producer_id,
)
from samsa.protocol.api_keys import ApiKey
from tests.broker.test_group_api_versions import call, unique, versions
from tests.brokerproc import BrokerProcess
from tests.wire import WireClient

NONE = ErrorCode.none


def create(c: WireClient, version: int, *topics: dict[str, Any]) -> Any:
    return call(c, ApiKey.CREATE_TOPICS, version, timeout=10000, validate_only=False,
                topics=[{"num_partitions": 2, "replication_factor": 1, "assignments": [],
                         "configs": [], **t} for t in topics])


@pytest.mark.parametrize("version", versions(create_topics))
def test_create_topics(client: WireClient, version: int) -> None:
    name, other = unique("ct"), unique("ct")
    resp = create(client, version, {"name": name, "configs": [
        {"name": "retention.ms", "value": "60000"}]})
    (t,) = resp.topics
    assert (t.name, t.error_code) == (name, NONE)
    if version >= 5:
        assert (t.num_partitions, t.replication_factor) == (2, 1)
        configs = {c.name: c for c in t.configs}
        assert configs["retention.ms"].value == "60000"
        assert configs["retention.ms"].config_source == 1  # the topic's own
        assert configs["cleanup.policy"].config_source == 5  # the broker's default
    if version >= 7:
        assert t.topic_id is not None and t.topic_id.int != 0
    resp = create(client, version, {"name": name}, {"name": other, "replication_factor": 3},
                  {"name": other})
    assert [(t.name, t.error_code) for t in resp.topics] == [
        (name, ErrorCode.topic_already_exists), (other, ErrorCode.invalid_request),
        (other, ErrorCode.invalid_request)]
    assert all(t.error_message for t in resp.topics)
    if version >= 5:
        assert [(t.num_partitions, t.replication_factor, t.configs) for t in resp.topics] \
            == [(-1, -1, None)] * 3
    (t,) = create(client, version, {"name": other, "replication_factor": 3}).topics
    assert t.error_code == ErrorCode.invalid_replication_factor and "3 time(s)" in t.error_message


@pytest.mark.parametrize("version", versions(create_partitions))
def test_create_partitions(client: WireClient, version: int) -> None:
    name = unique("cp")
    assert create(client, 7, {"name": name}).topics[0].error_code == NONE
    resp = call(client, ApiKey.CREATE_PARTITIONS, version, timeout=10000, validate_only=False,
                topics=[{"name": name, "count": 3, "assignments": None},
                        {"name": unique("cp-missing"), "count": 3, "assignments": None},
                        {"name": name, "count": 4, "assignments": [{"broker_ids": [99]}]}])
    assert [r.error_code for r in resp.results] == [
        NONE, ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_replica_assignment]
    assert resp.results[0].name == name and resp.results[0].error_message is None
    assert resp.results[2].error_message == "Unknown broker in assignment."
    resp = call(client, ApiKey.CREATE_PARTITIONS, version, timeout=10000, validate_only=False,
                topics=[{"name": name, "count": 2, "assignments": None}])
    assert resp.results[0].error_code == ErrorCode.invalid_partitions


@pytest.mark.parametrize("version", versions(delete_topics))
def test_delete_topics(client: WireClient, version: int) -> None:
    name, missing = unique("dt"), unique("dt-missing")
    topic_id = create(client, 7, {"name": name}).topics[0].topic_id
    if version >= 6:
        topics = [{"name": None, "topic_id": topic_id},
                  {"name": missing, "topic_id": uuid.UUID(int=0)},
                  {"name": None, "topic_id": uuid.uuid4()}]
        resp = call(client, ApiKey.DELETE_TOPICS, version, timeout=10000, topics=topics)
        assert [(r.name, r.error_code) for r in resp.responses] == [
            (name, NONE), (missing, ErrorCode.unknown_topic_or_partition),
            (None, ErrorCode.unknown_topic_id)]
        assert resp.responses[0].topic_id == topic_id
        assert resp.responses[2].error_message
    else:
        resp = call(client, ApiKey.DELETE_TOPICS, version, timeout=10000,
                    topic_names=[name, missing])
        assert [(r.name, r.error_code) for r in resp.responses] == [
            (name, NONE), (missing, ErrorCode.unknown_topic_or_partition)]
    if version >= 5:
        assert resp.responses[0].error_message is None and resp.responses[1].error_message


@pytest.mark.parametrize("version", versions(init_producer_id))
def test_init_producer_id(client: WireClient, version: int) -> None:
    fields = dict(transactional_id=None, transaction_timeout=60000, producer_id=-1,
                  producer_epoch=-1)
    first = call(client, ApiKey.INIT_PRODUCER_ID, version, **fields)
    assert first.error_code == NONE and first.producer_id >= 0 and first.producer_epoch == 0
    again = call(client, ApiKey.INIT_PRODUCER_ID, version, **fields)
    assert again.producer_id != first.producer_id
    if version >= 3:  # KIP-360: a producer that knows its id bumps the epoch
        bumped = call(client, ApiKey.INIT_PRODUCER_ID, version,
                      **{**fields, "producer_id": first.producer_id, "producer_epoch": 4})
        assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 5)
    tid = f"tx-{version}"  # a transactional id: the transaction coordinator answers
    deadline = time.monotonic() + 10
    while (txn := call(client, ApiKey.INIT_PRODUCER_ID, version,
                       **{**fields, "transactional_id": tid})).error_code \
            == ErrorCode.coordinator_not_available and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (txn.error_code, txn.producer_epoch) == (NONE, 0) and txn.producer_id >= 0
    again = call(client, ApiKey.INIT_PRODUCER_ID, version, **{**fields, "transactional_id": tid})
    assert (again.producer_id, again.producer_epoch) == (txn.producer_id, 1)
    too_long = call(client, ApiKey.INIT_PRODUCER_ID, version,
                    **{**fields, "transactional_id": tid, "transaction_timeout": 900_001})
    assert too_long.error_code == ErrorCode.invalid_transaction_timeout


@pytest.mark.parametrize("version", versions(describe_cluster))
def test_describe_cluster(client: WireClient, broker: BrokerProcess, version: int) -> None:
    resp = call(client, ApiKey.DESCRIBE_CLUSTER, version,
                include_cluster_authorized_operations=False, endpoint_type=1)
    assert resp.error_code == NONE and resp.cluster_id
    (node,) = resp.brokers
    assert f"{node.host}:{node.port}" == broker.bootstrap
    assert resp.controller_id == node.broker_id
    assert resp.cluster_authorized_operations == -2147483648
    if version >= 1:
        assert resp.endpoint_type == 1
        refused = call(client, ApiKey.DESCRIBE_CLUSTER, version,
                       include_cluster_authorized_operations=False, endpoint_type=2)
        assert refused.error_code == ErrorCode.unsupported_endpoint_type
        assert (refused.endpoint_type, refused.brokers, refused.controller_id) == (2, (), -1)
        assert refused.cluster_id == resp.cluster_id
