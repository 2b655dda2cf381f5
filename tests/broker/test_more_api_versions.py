"""Every version of the config, ApiVersions, consumer-protocol, ListOffsets and Metadata
APIs, over TCP with raw requests.

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
    MODULES,
    alter_configs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    describe_configs,
    incremental_alter_configs,
    list_offsets,
    metadata,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.records import encode_batch
from tests.broker.test_admin_api_versions import create
from tests.broker.test_group_api_versions import call, unique, versions
from tests.brokerproc import BrokerProcess
from tests.wire import WireClient

NONE = ErrorCode.none
TOPIC, BROKER, GROUP = 2, 4, 32


def topic(c: WireClient) -> str:
    name = unique("cfg")
    assert create(c, 7, {"name": name}).topics[0].error_code == NONE
    return name


def retention(c: WireClient, name: str) -> str | None:
    resp = call(c, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False,
                include_documentation=False, resources=[
                    {"resource_type": TOPIC, "resource_name": name,
                     "configuration_keys": ["retention.ms"]}])
    value: str | None = resp.results[0].configs[0].value
    return value


@pytest.mark.parametrize("version", versions(alter_configs))
def test_alter_configs(client: WireClient, version: int) -> None:
    name = topic(client)
    good = {"resource_type": TOPIC, "resource_name": name,
            "configs": [{"name": "retention.ms", "value": "60000"}]}
    resp = call(client, ApiKey.ALTER_CONFIGS, version, validate_only=False, resources=[
        good, {"resource_type": TOPIC, "resource_name": unique("cfg-missing"), "configs": []},
        {"resource_type": BROKER, "resource_name": "99", "configs": []}])
    assert [(r.resource_type, r.error_code) for r in resp.responses] == [
        (TOPIC, NONE), (TOPIC, ErrorCode.unknown_topic_or_partition),
        (BROKER, ErrorCode.invalid_request)]
    assert resp.responses[0].resource_name == name and resp.responses[0].error_message is None
    assert resp.responses[1].error_message and resp.responses[2].error_message
    assert retention(client, name) == "60000"
    bad = {**good, "configs": [{"name": "retention.ms", "value": "soon"}]}
    (r,) = call(client, ApiKey.ALTER_CONFIGS, version, validate_only=True,
                resources=[bad]).responses
    assert r.error_code == ErrorCode.invalid_config and r.error_message
    (r,) = call(client, ApiKey.ALTER_CONFIGS, version, validate_only=False,
                resources=[{**good, "configs": []}]).responses
    assert r.error_code == NONE and retention(client, name) != "60000"


@pytest.mark.parametrize("version", versions(incremental_alter_configs))
def test_incremental_alter_configs(client: WireClient, version: int) -> None:
    name = topic(client)

    def alter(op: int, value: str | None, validate_only: bool = False) -> Any:
        return call(client, ApiKey.INCREMENTAL_ALTER_CONFIGS, version,
                    validate_only=validate_only, resources=[
                        {"resource_type": TOPIC, "resource_name": name, "configs": [
                            {"name": "retention.ms", "config_operation": op,
                             "value": value}]}]).responses

    (r,) = alter(0, "60000", validate_only=True)
    assert (r.resource_type, r.resource_name, r.error_code) == (TOPIC, name, NONE)
    assert retention(client, name) != "60000"
    (r,) = alter(0, "60000")
    assert r.error_code == NONE and r.error_message is None
    assert retention(client, name) == "60000"
    (r,) = alter(2, "1")  # APPEND to a number
    assert r.error_code == ErrorCode.invalid_config and r.error_message
    (r,) = alter(1, None)
    assert r.error_code == NONE and retention(client, name) != "60000"


@pytest.mark.parametrize("version", versions(api_versions))
def test_api_versions(client: WireClient, version: int) -> None:
    fields = dict(client_software_name="samsa-test", client_software_version="1.0")
    resp = call(client, ApiKey.API_VERSIONS, version, **fields)
    assert resp.error_code == NONE
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert served == {int(m.API_KEY): m.VERSIONS for m in MODULES}
    assert [k.api_key for k in resp.api_keys] == sorted(served)
    if version >= 1:
        assert resp.throttle_time.total_seconds() == 0
    if version < 3:
        assert not hasattr(resp, "finalized_features")  # the features are tagged fields of v3+
        return
    # Kafka 4.3's shape: a finalized level is min = max = level; v3 leaves out a supported
    # range starting at 0, v4 lists it (KAFKA-17011).
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in resp.finalized_features] == [("group.version", 1, 1),
                                                  ("share.version", 1, 1),
                                                  ("transaction.version", 2, 2)]
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    assert supported == ({} if version == 3 else {
        "group.version": (0, 1), "share.version": (0, 1), "transaction.version": (0, 2)})
    again = call(client, ApiKey.API_VERSIONS, version, **fields)
    assert resp.finalized_features_epoch >= 0
    assert again.finalized_features_epoch == resp.finalized_features_epoch
    refused = call(client, ApiKey.API_VERSIONS, version,
                   **{**fields, "client_software_name": "bad name"})
    assert refused.error_code == ErrorCode.invalid_request
    assert refused.api_keys == resp.api_keys
    assert (refused.supported_features, refused.finalized_features,
            refused.finalized_features_epoch) == ((), (), -1)  # as Kafka's error answers


def heartbeat(c: WireClient, version: int, group: str, member_id: str, epoch: int,
              topics: list[str] | None) -> Any:
    return call(c, ApiKey.CONSUMER_GROUP_HEARTBEAT, version, group_id=group,
                member_id=member_id, member_epoch=epoch, instance_id=None, rack_id="rack-a",
                rebalance_timeout=30000, subscribed_topic_names=topics,
                subscribed_topic_regex=None, server_assignor=None,
                topic_partitions=None if topics is None else [])


def assigned(c: WireClient, version: int, group: str, joined: Any) -> Any:
    """Heartbeats until the member's first target has landed (KIP-1263: it is computed in
    the background, so the join is answered before it, at epoch 1 with nothing)."""
    r = joined
    deadline = time.monotonic() + 15
    while not (r.assignment and r.assignment.topic_partitions):
        assert time.monotonic() < deadline, r
        time.sleep(0.05)
        r = heartbeat(c, version, group, joined.member_id, r.member_epoch, None)
        assert r.error_code == NONE, r
    return r


@pytest.mark.parametrize("version", versions(consumer_group_heartbeat))
def test_consumer_group_heartbeat(client: WireClient, version: int) -> None:
    name, group = unique("cgh"), unique("cgh")
    topic_id = create(client, 7, {"name": name}).topics[0].topic_id
    joined = heartbeat(client, version, group, "" if version == 0 else str(uuid.uuid4()), 0,
                       [name])
    assert joined.error_code == NONE and joined.error_message is None
    assert joined.member_id and joined.member_epoch >= 1
    assert joined.heartbeat_interval.total_seconds() > 0
    joined = assigned(client, version, group, joined)
    (owned,) = joined.assignment.topic_partitions
    assert (owned.topic_id, sorted(owned.partitions)) == (topic_id, [0, 1])
    again = heartbeat(client, version, group, joined.member_id, joined.member_epoch, None)
    assert (again.error_code, again.member_epoch) == (NONE, joined.member_epoch)
    assert again.assignment is None  # unchanged
    fenced = heartbeat(client, version, group, "nobody", 5, None)
    assert fenced.error_code == ErrorCode.unknown_member_id and fenced.error_message
    assert (fenced.member_id, fenced.member_epoch, fenced.assignment) == (None, 0, None)
    left = heartbeat(client, version, group, joined.member_id, -1, None)
    assert (left.error_code, left.member_epoch) == (NONE, -1)


@pytest.mark.parametrize("version", versions(consumer_group_describe))
def test_consumer_group_describe(client: WireClient, version: int) -> None:
    name, group = topic(client), unique("cgd")
    joined = assigned(client, 1, group, heartbeat(client, 1, group, str(uuid.uuid4()), 0,
                                                  [name]))
    resp = call(client, ApiKey.CONSUMER_GROUP_DESCRIBE, version, group_ids=[group, "missing"],
                include_authorized_operations=False)
    described, missing = resp.groups
    assert (described.group_id, described.error_code) == (group, NONE)
    assert described.group_state and described.assignor_name
    assert described.group_epoch >= 1 and described.assignment_epoch >= 1
    assert described.authorized_operations == -2147483648
    (m,) = described.members
    assert (m.member_id, m.member_epoch, m.rack_id) == (
        joined.member_id, joined.member_epoch, "rack-a")
    assert (m.client_id, m.instance_id, m.subscribed_topic_regex) == ("wire-test", None, None)
    assert m.client_host and list(m.subscribed_topic_names) == [name]
    for a in (m.assignment, m.target_assignment):
        (tp,) = a.topic_partitions
        assert (tp.topic_name, sorted(tp.partitions)) == (name, [0, 1])
    if version >= 1:
        assert m.member_type == 1
    assert (missing.group_id, missing.error_code) == ("missing", ErrorCode.group_id_not_found)
    assert missing.error_message and missing.members == ()


@pytest.mark.parametrize("version", versions(describe_configs))
def test_describe_configs(client: WireClient, version: int) -> None:
    name = unique("dc")
    assert create(client, 7, {"name": name, "configs": [
        {"name": "retention.ms", "value": "60000"}]}).topics[0].error_code == NONE
    resp = call(client, ApiKey.DESCRIBE_CONFIGS, version, include_synonyms=True,
                include_documentation=True, resources=[
                    {"resource_type": TOPIC, "resource_name": name,
                     "configuration_keys": ["retention.ms", "cleanup.policy"]},
                    {"resource_type": TOPIC, "resource_name": unique("dc-missing"),
                     "configuration_keys": None},
                    {"resource_type": BROKER, "resource_name": "0",
                     "configuration_keys": ["log.retention.ms", "node.id"]},
                    {"resource_type": BROKER, "resource_name": "9", "configuration_keys": None},
                    {"resource_type": GROUP, "resource_name": unique("dc-group"),
                     "configuration_keys": ["consumer.session.timeout.ms"]},
                    {"resource_type": GROUP, "resource_name": "", "configuration_keys": None}])
    t, missing, node, other, group, nameless = resp.results
    assert [r.resource_type for r in resp.results] == [TOPIC, TOPIC, BROKER, BROKER, GROUP, GROUP]
    assert (t.resource_name, t.error_code, t.error_message) == (name, NONE, None)
    cleanup, retention = t.configs  # sorted by name
    assert (retention.name, retention.value, retention.config_source) == (
        "retention.ms", "60000", 1)  # the topic's own
    assert (cleanup.name, cleanup.value, cleanup.config_source) == ("cleanup.policy", "delete", 5)
    assert not retention.read_only and not retention.is_sensitive
    synonyms = [(s.name, s.value, s.source) for s in retention.synonyms]
    assert synonyms[0] == ("retention.ms", "60000", 1)
    assert (synonyms[-1][0], synonyms[-1][2]) == ("log.retention.ms", 5)  # the default
    assert missing.error_code == ErrorCode.unknown_topic_or_partition and missing.error_message
    assert node.error_code == NONE
    configs = {c.name: c for c in node.configs}
    assert set(configs) == {"log.retention.ms", "node.id"}
    assert configs["node.id"].read_only and not configs["log.retention.ms"].read_only
    assert other.error_code == ErrorCode.invalid_request and other.configs == ()
    (session,) = group.configs
    assert (group.error_code, session.name) == (NONE, "consumer.session.timeout.ms")
    assert session.synonyms and session.value is not None
    assert nameless.error_code == ErrorCode.invalid_request and nameless.error_message
    if version >= 3:
        assert (retention.config_type, cleanup.config_type, session.config_type) == (5, 7, 3)
        assert retention.documentation and session.documentation
    plain = call(client, ApiKey.DESCRIBE_CONFIGS, version, include_synonyms=False,
                 include_documentation=False, resources=[
                     {"resource_type": TOPIC, "resource_name": name,
                      "configuration_keys": ["retention.ms"]}])
    (c,) = plain.results[0].configs
    assert (c.value, c.synonyms) == ("60000", ())
    if version >= 3:
        assert c.documentation is None


def metadata_call(c: WireClient, version: int, *topics: dict[str, Any],
                  allow_create: bool = False) -> Any:
    return call(c, ApiKey.METADATA, version, allow_auto_topic_creation=allow_create,
                include_topic_authorized_operations=False,
                include_cluster_authorized_operations=False,
                topics=[{"topic_id": None, **t} for t in topics])


@pytest.mark.parametrize("version", versions(metadata))
def test_metadata(client: WireClient, broker: BrokerProcess, version: int) -> None:
    name, missing = unique("md"), unique("md-missing")
    topic_id = create(client, 7, {"name": name}).topics[0].topic_id
    resp = metadata_call(client, version, {"name": name}, {"name": "bad name!"},
                         *([{"name": missing}] if version >= 4 else []))
    (node,) = resp.brokers
    assert f"{node.host}:{node.port}" == broker.bootstrap
    t, bad, *rest = resp.topics
    assert (t.name, t.error_code) == (name, NONE)
    assert [p.partition_index for p in t.partitions] == [0, 1]
    for p in t.partitions:
        assert (p.error_code, p.leader_id) == (NONE, node.node_id)
        assert list(p.replica_nodes) == list(p.isr_nodes) == [node.node_id]
    assert (bad.name, bad.error_code, bad.partitions) == (
        "bad name!", ErrorCode.invalid_topic_exception, ())
    if version >= 1:
        assert resp.controller_id == node.node_id and node.rack is None
        assert not t.is_internal
    if version >= 2:
        assert resp.cluster_id
    if version >= 4:
        (m,) = rest
        assert (m.name, m.error_code) == (missing, ErrorCode.unknown_topic_or_partition)
    if version >= 5:
        assert all(p.offline_replicas == () for p in t.partitions)
    if version >= 7:
        assert [p.leader_epoch for p in t.partitions] == [0, 0]
    if version >= 8:
        assert t.topic_authorized_operations == -2147483648
    if 8 <= version <= 10:
        assert resp.cluster_authorized_operations == -2147483648
    if version >= 10:
        assert t.topic_id == topic_id and bad.topic_id is None  # kio reads the zero id as null
    if version >= 12:
        by_id, unknown = metadata_call(client, version, {"name": None, "topic_id": topic_id},
                                       {"name": None, "topic_id": uuid.uuid4()}).topics
        assert (by_id.name, by_id.topic_id, len(by_id.partitions)) == (name, topic_id, 2)
        assert (unknown.name, unknown.error_code) == (None, ErrorCode.unknown_topic_id)
    elif version >= 10:  # as Kafka: no lookup by id, no null name before v12
        refused = metadata_call(client, version, {"name": name},
                                {"name": None, "topic_id": topic_id})
        assert refused.brokers == () and [(x.name, x.topic_id, x.error_code, x.partitions)
                                          for x in refused.topics] == [
            (name, None, ErrorCode.invalid_request, ()),
            ("", topic_id, ErrorCode.invalid_request, ())]
    everything = call(client, ApiKey.METADATA, version, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False,
                      include_cluster_authorized_operations=False,
                      topics=None if version >= 1 else [])  # all topics
    assert name in {x.name for x in everything.topics}
    auto = unique("md-auto")
    (created,) = metadata_call(client, version, {"name": auto}, allow_create=True).topics
    assert (created.name, created.error_code, len(created.partitions)) == (auto, NONE, 1)


@pytest.mark.parametrize("version", versions(list_offsets))
def test_list_offsets(client: WireClient, version: int) -> None:
    name = unique("lo")
    assert create(client, 7, {"name": name}).topics[0].error_code == NONE
    batch = encode_batch([(ts, b"k", b"v", ()) for ts in (1000, 5000, 3000, 5000, 2000)])
    produced = call(client, ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=10000,
                    topic_data=[{"name": name, "partition_data": [
                        {"index": 0, "records": batch}]}])
    assert produced.responses[0].partition_responses[0].error_code == NONE

    def ask(*parts: tuple[int, int]) -> list[tuple[int, int, int, int, int]]:
        resp = call(client, ApiKey.LIST_OFFSETS, version, replica_id=-1, isolation_level=0,
                    topics=[{"name": name, "partitions": [
                        {"partition_index": p, "timestamp": ts, "current_leader_epoch": -1}
                        for p, ts in parts]}])
        (t,) = resp.topics
        assert t.name == name
        epochs = [p.leader_epoch if version >= 4 else 0 for p in t.partitions]
        return [(p.partition_index, p.error_code, p.offset, p.timestamp, e)
                for p, e in zip(t.partitions, epochs, strict=True)]

    no = -1 if version >= 4 else 0  # leader epoch "none" (v4+), or absent
    assert ask((0, -2), (1, -1), (7, -1)) == [
        (0, NONE, 0, -1, 0), (1, NONE, 0, -1, 0),
        (7, ErrorCode.unknown_topic_or_partition, -1, -1, no)]
    assert ask((0, -1), (0, -2)) == [  # a partition asked twice
        (0, NONE, 5, -1, 0), (0, ErrorCode.invalid_request, -1, -1, no)]
    assert ask((0, 2500)) == [(0, NONE, 1, 5000, 0)]  # the first at or after it
    assert ask((0, 9999)) == [(0, NONE, -1, -1, no)]
    assert ask((0, -4)) == [(0, ErrorCode.invalid_request, -1, -1, no)]
    assert ask((0, -3)) == ([(0, NONE, 1, 5000, 0)] if version >= 7
                            else [(0, ErrorCode.unsupported_version, -1, -1, no)])
