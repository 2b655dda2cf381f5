"""The authorization matrix over TCP: every API x the ACLs Kafka's table says it needs,
granted and denied, on a real broker with ``authorizer.class.name`` set and
``allow.everyone.if.no.acl.found=false``; then the filtering rules (Metadata, ListGroups,
OffsetFetch, ConsumerGroupHeartbeat regexes, KAFKA-18813), authorized operations, the ACL
APIs' errors, persistence, denial logs and metrics. The administrator is the secure broker's
super user and the subject a principal of its own (SCRAM, or a client certificate), each
connected over TLS; see :mod:`tests.security.kit`.
"""

from __future__ import annotations

import re
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol.api_keys import ApiKey
from samsa.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.security.authorizer import FileAclStore
from tests.brokerproc import BrokerProcess
from tests.security.conftest import Secure
from tests.security.kit import (
    ADMIN,
    ALLOW,
    DENIED,
    DENY,
    NONE,
    SUBJECT,
    SUBJECT_HOST,
    C,
    E,
    G,
    Op,
    T,
    X,
    acl_body,
    call,
    commit,
    create_topic,
    grant,
    heartbeat,
    prepare,
    produce,
    revoke,
    unique,
)
from tests.wire import WireClient

# ---- the matrix ---------------------------------------------------------------------------


@dataclass
class Case:
    """The names of one run of one row (fresh every run) and the two connections."""

    admin: WireClient
    subject: WireClient
    topic: str = field(default_factory=lambda: unique("t"))
    group: str = field(default_factory=lambda: unique("g"))
    txn: str = field(default_factory=lambda: unique("x"))

    def name(self, rtype: ResourceType) -> str:
        return {T: self.topic, G: self.group, C: CLUSTER_NAME, X: self.txn}[rtype]


Need = tuple[ResourceType, AclOperation]


@dataclass(frozen=True)
class Row:
    api: str
    needs: tuple[Need, ...]
    run: Callable[[Case], int]
    """The subject's request; returns the error code that tells the outcome."""
    granted: int = NONE
    setup: Callable[[Case], None] = lambda case: None
    denied: dict[Need, int] = field(default_factory=dict)
    """The error when a need is missing, where it is not the need's resource type's."""


def _fetch(c: Case) -> int:
    resp = call(c.subject, ApiKey.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1,
                max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                topics=[{"topic": c.topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}], forgotten_topics_data=[],
                rack_id="")
    return int(resp.responses[0].partitions[0].error_code)


def _metadata(c: Case, create: bool) -> int:
    resp = call(c.subject, ApiKey.METADATA, 12, topics=[{"name": c.topic, "topic_id": None}],
                allow_auto_topic_creation=create, include_topic_authorized_operations=False)
    return int(resp.topics[0].error_code)


def _create_topic(c: Case) -> int:
    resp = call(c.subject, ApiKey.CREATE_TOPICS, 7, timeout=10000, validate_only=False,
                topics=[{"name": c.topic, "num_partitions": 1, "replication_factor": 1,
                         "assignments": [], "configs": []}])
    return int(resp.topics[0].error_code)


def _delete_topic(c: Case) -> int:
    resp = call(c.subject, ApiKey.DELETE_TOPICS, 6, timeout=10000,
                topics=[{"name": c.topic, "topic_id": uuid.UUID(int=0)}])
    return int(resp.responses[0].error_code)


def _describe_configs(rtype: int, name: Callable[[Case], str]) -> Callable[[Case], int]:
    def run(c: Case) -> int:
        resp = call(c.subject, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False,
                    include_documentation=False, resources=[
                        {"resource_type": rtype, "resource_name": name(c),
                         "configuration_keys": None}])
        return int(resp.results[0].error_code)
    return run


def _alter_configs(rtype: int, key: str, value: str, name: Callable[[Case], str],
                   incremental: bool) -> Callable[[Case], int]:
    def run(c: Case) -> int:
        config = {"name": key, "value": value, **({"config_operation": 0} if incremental
                                                    else {})}
        resp = call(c.subject, ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental
                    else ApiKey.ALTER_CONFIGS, 1 if incremental else 2, validate_only=True,
                    resources=[{"resource_type": rtype, "resource_name": name(c),
                                "configs": [config]}])
        return int(resp.responses[0].error_code)
    return run


_STARTING = (E.coordinator_not_available, E.coordinator_load_in_progress)


def _until_started(request: Callable[[], int]) -> int:
    """``request``'s answer once the transaction coordinator runs (the first transactional
    request creates ``__transaction_state``)."""
    deadline = time.monotonic() + 10
    while (code := request()) in _STARTING and time.monotonic() < deadline:
        time.sleep(0.05)
    return code


def _find_coordinator(key_type: int) -> Callable[[Case], int]:
    def run(c: Case) -> int:
        key = c.group if key_type == 0 else c.txn
        return _until_started(lambda: int(call(
            c.subject, ApiKey.FIND_COORDINATOR, 4, key_type=key_type,
            coordinator_keys=[key]).coordinators[0].error_code))
    return run


def _end_txn(c: Case) -> int:
    return _until_started(lambda: int(call(
        c.subject, ApiKey.END_TXN, 3, transactional_id=c.txn, producer_id=1, producer_epoch=0,
        committed=True).error_code))


def _add_partitions_to_txn(c: Case) -> int:
    return _until_started(lambda: int(call(
        c.subject, ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=c.txn,
        v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[{"name": c.topic, "partitions": [0]}],
    ).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code))


def _verify_partitions_in_txn(c: Case) -> int:
    """AddPartitionsToTxn v4, a broker's verification (KIP-890 part 1)."""
    def run() -> int:
        resp = call(c.subject, ApiKey.ADD_PARTITIONS_TO_TXN, 4, transactions=[{
            "transactional_id": c.txn, "producer_id": 1, "producer_epoch": 0,
            "verify_only": True, "topics": [{"name": c.topic, "partitions": [0]}]}])
        if resp.error_code:
            return int(resp.error_code)
        return int(resp.results_by_transaction[0].topic_results[0].results_by_partition[0]
                   .partition_error_code)
    return _until_started(run)


def _add_offsets_to_txn(c: Case) -> int:
    return _until_started(lambda: int(call(
        c.subject, ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id=c.txn, producer_id=1,
        producer_epoch=0, group_id=c.group).error_code))


def _txn_offset_commit(c: Case) -> int:
    """Granted, the transaction coordinator is asked whether the group's offsets partition
    is in the transaction (KIP-890 part 1): it does not know the id."""
    return _until_started(lambda: int(call(
        c.subject, ApiKey.TXN_OFFSET_COMMIT, 3, transactional_id=c.txn, group_id=c.group,
        producer_id=1, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[{"name": c.topic, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]).topics[0].partitions[0].error_code))


def _describe_transactions(c: Case) -> int:
    return _until_started(lambda: int(call(
        c.subject, ApiKey.DESCRIBE_TRANSACTIONS, 0,
        transactional_ids=[c.txn]).transaction_states[0].error_code))


def _init_transactional_id(c: Case) -> int:
    return _until_started(lambda: int(call(
        c.subject, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=c.txn,
        transaction_timeout=60000, producer_id=-1, producer_epoch=-1).error_code))


def _join(c: Case) -> int:
    return int(call(c.subject, ApiKey.JOIN_GROUP, 9, group_id=c.group, session_timeout=6000,
                    rebalance_timeout=6000, member_id="", protocol_type="consumer",
                    group_instance_id=None, reason=None,
                    protocols=[{"name": "range", "metadata": b""}]).error_code)


def _offset_fetch(c: Case) -> int:
    resp = call(c.subject, ApiKey.OFFSET_FETCH, 9, require_stable=False, groups=[
        {"group_id": c.group, "member_id": None, "member_epoch": -1,
         "topics": [{"name": c.topic, "partition_indexes": [0]}]}])
    group = resp.groups[0]
    return int(group.error_code or group.topics[0].partitions[0].error_code)


def _offset_delete(c: Case) -> int:
    resp = call(c.subject, ApiKey.OFFSET_DELETE, 0, group_id=c.group, topics=[
        {"name": c.topic, "partitions": [{"partition_index": 0}]}])
    return int(resp.error_code or resp.topics[0].partitions[0].error_code)


def _init_producer_id(c: Case) -> int:
    return int(call(c.subject, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None,
                    transaction_timeout=60000, producer_id=-1, producer_epoch=-1).error_code)


def _member_of(c: Case) -> None:
    """A consumer-protocol member of the case's group (the administrator's), assigned the
    case's topic."""
    create_topic(c.admin, c.topic)
    resp = heartbeat(c.admin, c.group, subscribed_topic_names=[c.topic])
    assert resp.error_code == NONE, resp


def _consumer_group_describe(c: Case) -> int:
    deadline = time.monotonic() + 10
    while True:  # until the member's assignment names the topic
        resp = call(c.subject, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=[c.group],
                    include_authorized_operations=False)
        group = resp.groups[0]
        if group.error_code or any(m.assignment.topic_partitions for m in group.members) or \
                time.monotonic() > deadline:
            return int(group.error_code)
        time.sleep(0.05)


def _share_member_of(c: Case) -> None:
    """A share group member of the case's group (the administrator's), assigned the case's
    topic."""
    create_topic(c.admin, c.topic)
    resp = call(c.admin, ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=c.group,
                member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
                subscribed_topic_names=[c.topic])
    assert resp.error_code == NONE, resp


def _share_group_describe(c: Case) -> int:
    """KAFKA-18813 for share groups: a member assigned a topic the caller may not describe
    hides the group (TOPIC_AUTHORIZATION_FAILED, no members)."""
    deadline = time.monotonic() + 10
    while True:  # until the member's assignment names the topic
        group = call(c.subject, ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=[c.group],
                     include_authorized_operations=False).groups[0]
        if group.error_code:
            assert not group.members
        if group.error_code or any(m.assignment.topic_partitions for m in group.members) or \
                time.monotonic() > deadline:
            return int(group.error_code)
        time.sleep(0.05)


def _acl_filter(c: Case) -> dict[str, Any]:
    return {"resource_type_filter": int(T), "resource_name_filter": c.topic,
            "pattern_type_filter": int(PatternType.LITERAL), "principal_filter": None,
            "host_filter": None, "operation": int(Op.ANY),
            "permission_type": int(AclPermissionType.ANY)}


def _create_acls(c: Case) -> int:
    nobody = AclBinding(T, c.topic, PatternType.LITERAL, "User:nobody", "*", Op.READ, ALLOW)
    return int(call(c.subject, ApiKey.CREATE_ACLS, 3,
                    creations=[acl_body(nobody)]).results[0].error_code)


def _topic(c: Case) -> None:
    create_topic(c.admin, c.topic)


def _group_with_offsets(c: Case) -> None:
    create_topic(c.admin, c.topic)
    assert commit(c.admin, c.group, c.topic).topics[0].partitions[0].error_code == NONE


ROWS = [
    Row("ApiVersions", (), lambda c: int(call(
        c.subject, ApiKey.API_VERSIONS, 3, client_software_name="t",
        client_software_version="1").error_code)),
    Row("Produce", ((T, Op.WRITE),), lambda c: int(
        produce(c.subject, c.topic).responses[0].partition_responses[0].error_code),
        setup=_topic),
    Row("Fetch", ((T, Op.READ),), _fetch, setup=_topic),
    Row("ListOffsets", ((T, Op.DESCRIBE),), lambda c: int(call(
        c.subject, ApiKey.LIST_OFFSETS, 8, replica_id=-1, isolation_level=0, topics=[
            {"name": c.topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                              "timestamp": -1}]}]
    ).topics[0].partitions[0].error_code), setup=_topic),
    Row("ListOffsets implied by READ", ((T, Op.READ),), lambda c: int(call(
        c.subject, ApiKey.LIST_OFFSETS, 8, replica_id=-1, isolation_level=0, topics=[
            {"name": c.topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                              "timestamp": -2}]}]
    ).topics[0].partitions[0].error_code), setup=_topic),
    Row("Metadata", ((T, Op.DESCRIBE),), lambda c: _metadata(c, False), setup=_topic),
    Row("Metadata auto-creation by topic CREATE", ((T, Op.DESCRIBE), (T, Op.CREATE)),
        lambda c: _metadata(c, True)),
    Row("Metadata auto-creation by cluster CREATE", ((T, Op.DESCRIBE), (C, Op.CREATE)),
        lambda c: _metadata(c, True), denied={(C, Op.CREATE): E.topic_authorization_failed}),
    Row("CreateTopics by topic CREATE", ((T, Op.CREATE),), _create_topic),
    Row("CreateTopics by cluster CREATE", ((C, Op.CREATE),), _create_topic,
        denied={(C, Op.CREATE): E.topic_authorization_failed}),
    Row("DeleteTopics by topic DELETE", ((T, Op.DELETE),), _delete_topic, setup=_topic),
    Row("DeleteTopics by cluster DELETE", ((C, Op.DELETE),), _delete_topic, setup=_topic,
        denied={(C, Op.DELETE): E.topic_authorization_failed}),
    Row("CreatePartitions", ((T, Op.ALTER),), lambda c: int(call(
        c.subject, ApiKey.CREATE_PARTITIONS, 3, timeout=10000, validate_only=False, topics=[
            {"name": c.topic, "count": 2, "assignments": None}]).results[0].error_code),
        setup=_topic),
    Row("DescribeConfigs topic", ((T, Op.DESCRIBE_CONFIGS),),
        _describe_configs(2, lambda c: c.topic), setup=_topic),
    Row("DescribeConfigs implied by ALTER_CONFIGS", ((T, Op.ALTER_CONFIGS),),
        _describe_configs(2, lambda c: c.topic), setup=_topic),
    Row("DescribeConfigs broker", ((C, Op.DESCRIBE_CONFIGS),),
        _describe_configs(4, lambda c: "0")),
    Row("DescribeConfigs group", ((G, Op.DESCRIBE_CONFIGS),),
        _describe_configs(32, lambda c: c.group)),
    Row("AlterConfigs topic", ((T, Op.ALTER_CONFIGS),),
        _alter_configs(2, "retention.ms", "60000", lambda c: c.topic, False), setup=_topic),
    Row("IncrementalAlterConfigs broker", ((C, Op.ALTER_CONFIGS),),
        _alter_configs(4, "log.retention.ms", "60000", lambda c: "0", True)),
    Row("IncrementalAlterConfigs group", ((G, Op.ALTER_CONFIGS),),
        _alter_configs(32, "consumer.session.timeout.ms", "50000", lambda c: c.group, True)),
    Row("FindCoordinator group", ((G, Op.DESCRIBE),), _find_coordinator(0)),
    Row("FindCoordinator transaction", ((X, Op.DESCRIBE),), _find_coordinator(1)),
    Row("InitProducerId transactional", ((X, Op.WRITE),), _init_transactional_id),
    # authorized, the coordinator answers: this producer id holds no transactional id
    Row("EndTxn", ((X, Op.WRITE),), _end_txn, granted=E.invalid_producer_id_mapping),
    Row("DescribeTransactions", ((X, Op.DESCRIBE),), _describe_transactions,
        granted=E.transactional_id_not_found),
    Row("DescribeProducers", ((T, Op.READ),), lambda c: int(call(
        c.subject, ApiKey.DESCRIBE_PRODUCERS, 0, topics=[
            {"name": c.topic, "partition_indexes": [0]}]).topics[0].partitions[0].error_code),
        setup=_topic),
    Row("WriteTxnMarkers (KIP-664 abort)", ((C, Op.CLUSTER_ACTION),), lambda c: int(call(
        c.subject, ApiKey.WRITE_TXN_MARKERS, 1, markers=[{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": False,
            "coordinator_epoch": 0, "topics": [{"name": c.topic, "partition_indexes": [0]}]}]
        ).markers[0].topics[0].partitions[0].error_code), setup=_topic),
    Row("AddPartitionsToTxn", ((X, Op.WRITE), (T, Op.WRITE)), _add_partitions_to_txn,
        granted=E.invalid_producer_id_mapping, setup=_topic),
    Row("AddPartitionsToTxn v4 (brokers' verification)", ((C, Op.CLUSTER_ACTION),),
        _verify_partitions_in_txn, granted=E.invalid_producer_id_mapping, setup=_topic),
    Row("AddOffsetsToTxn", ((X, Op.WRITE), (G, Op.READ)), _add_offsets_to_txn,
        granted=E.invalid_producer_id_mapping),
    Row("TxnOffsetCommit", ((X, Op.WRITE), (G, Op.READ), (T, Op.READ)), _txn_offset_commit,
        granted=E.invalid_producer_id_mapping, setup=_topic),
    Row("JoinGroup", ((G, Op.READ),), _join, granted=E.member_id_required),
    Row("SyncGroup", ((G, Op.READ),), lambda c: int(call(
        c.subject, ApiKey.SYNC_GROUP, 5, group_id=c.group, generation_id=1, member_id="m",
        group_instance_id=None, protocol_type="consumer", protocol_name="range",
        assignments=[]).error_code), granted=E.unknown_member_id),
    Row("Heartbeat", ((G, Op.READ),), lambda c: int(call(
        c.subject, ApiKey.HEARTBEAT, 4, group_id=c.group, generation_id=1, member_id="m",
        group_instance_id=None).error_code), granted=E.unknown_member_id),
    Row("LeaveGroup", ((G, Op.READ),), lambda c: int(call(
        c.subject, ApiKey.LEAVE_GROUP, 5, group_id=c.group, members=[
            {"member_id": "m", "group_instance_id": None, "reason": None}]).error_code)),
    Row("OffsetCommit", ((G, Op.READ), (T, Op.READ)), lambda c: int(
        commit(c.subject, c.group, c.topic).topics[0].partitions[0].error_code),
        setup=_topic),
    Row("OffsetFetch", ((G, Op.DESCRIBE), (T, Op.DESCRIBE)), _offset_fetch,
        setup=_group_with_offsets),
    Row("OffsetDelete", ((G, Op.DELETE), (T, Op.READ)), _offset_delete,
        setup=_group_with_offsets),
    Row("DescribeGroups", ((G, Op.DESCRIBE),), lambda c: int(call(
        c.subject, ApiKey.DESCRIBE_GROUPS, 6, groups=[c.group],
        include_authorized_operations=False).groups[0].error_code),
        setup=_group_with_offsets),
    Row("DeleteGroups", ((G, Op.DELETE),), lambda c: int(call(
        c.subject, ApiKey.DELETE_GROUPS, 2, groups_names=[c.group]).results[0].error_code),
        setup=_group_with_offsets),
    Row("InitProducerId by cluster IDEMPOTENT_WRITE", ((C, Op.IDEMPOTENT_WRITE),),
        _init_producer_id),
    Row("InitProducerId by WRITE on a topic", ((T, Op.WRITE),), _init_producer_id,
        denied={(T, Op.WRITE): E.cluster_authorization_failed}),
    Row("ConsumerGroupHeartbeat", ((G, Op.READ), (T, Op.DESCRIBE)),
        lambda c: int(heartbeat(c.subject, c.group,
                                subscribed_topic_names=[c.topic]).error_code), setup=_topic),
    Row("ConsumerGroupDescribe", ((G, Op.DESCRIBE), (T, Op.DESCRIBE)),
        _consumer_group_describe, setup=_member_of),
    Row("ShareGroupDescribe", ((G, Op.DESCRIBE), (T, Op.DESCRIBE)),
        _share_group_describe, setup=_share_member_of),
    Row("DescribeUserScramCredentials", ((C, Op.DESCRIBE),), lambda c: int(
        (r := call(c.subject, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                   users=[{"name": "alice"}])).error_code or r.results[0].error_code)),
    Row("AlterUserScramCredentials", ((C, Op.ALTER),), lambda c: int(call(
        c.subject, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, upsertions=[], deletions=[
            {"name": c.topic, "mechanism": 1}]).results[0].error_code),
        granted=E.resource_not_found),  # authorized: the user has no credential to delete
    Row("CreateAcls", ((C, Op.ALTER),), _create_acls),
    Row("DescribeAcls", ((C, Op.DESCRIBE),), lambda c: int(call(
        c.subject, ApiKey.DESCRIBE_ACLS, 3, **_acl_filter(c)).error_code)),
    Row("DeleteAcls", ((C, Op.ALTER),), lambda c: int(call(
        c.subject, ApiKey.DELETE_ACLS, 3, filters=[_acl_filter(c)]
    ).filter_results[0].error_code)),
]


def subject_acl(c: Case, need: Need, host: str = SUBJECT_HOST) -> AclBinding:
    rtype, op = need
    return AclBinding(rtype, c.name(rtype), PatternType.LITERAL, SUBJECT, host, op, ALLOW)


def attempt(admin: WireClient, subject: WireClient, row: Row, missing: Need | None) -> int:
    case = Case(admin, subject)
    row.setup(case)
    acls = [subject_acl(case, n) for n in row.needs if n != missing]
    grant(admin, acls)
    try:
        return row.run(case)
    finally:
        revoke(admin, acls)


@pytest.mark.parametrize("row", ROWS, ids=[r.api for r in ROWS])
def test_authorization_matrix(admin: WireClient, subject: WireClient, row: Row) -> None:
    assert attempt(admin, subject, row, None) == row.granted
    for need in row.needs:
        expected = row.denied.get(need, DENIED[need[0]])
        assert attempt(admin, subject, row, need) == expected, f"without {need}"


# ---- filtering, operations, DENY and hosts ------------------------------------------------


def test_metadata_and_list_groups_show_only_what_may_be_described(
        admin: WireClient, subject: WireClient) -> None:
    case = Case(admin, subject)
    hidden, hidden_group = unique("hidden"), unique("hidden-g")
    for name in (case.topic, hidden):
        create_topic(admin, name)
    for group in (case.group, hidden_group):
        assert commit(admin, group, case.topic).topics[0].partitions[0].error_code == NONE
    acls = [subject_acl(case, (T, Op.READ)), subject_acl(case, (G, Op.DESCRIBE))]
    grant(admin, acls)
    try:
        everything = call(subject, ApiKey.METADATA, 12, topics=None,
                          allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
        assert [t.name for t in everything.topics] == [case.topic]  # not hidden, nor internal
        listed = call(subject, ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=[])
        assert [g.group_id for g in listed.groups] == [case.group]
        fetched = call(subject, ApiKey.OFFSET_FETCH, 9, require_stable=False, groups=[
            {"group_id": hidden_group, "member_id": None, "member_epoch": -1, "topics": None},
            {"group_id": case.group, "member_id": None, "member_epoch": -1, "topics": None}])
        assert [(g.group_id, g.error_code) for g in fetched.groups] == [
            (hidden_group, E.group_authorization_failed), (case.group, NONE)]
        assert [t.name for t in fetched.groups[1].topics] == [case.topic]
        everyone = [subject_acl(case, (C, Op.DESCRIBE))]
        grant(admin, everyone)
        listed = call(subject, ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=[])
        assert {case.group, hidden_group} <= {g.group_id for g in listed.groups}
        revoke(admin, everyone)
    finally:
        revoke(admin, acls)


def test_offsets_of_all_topics_show_only_describable_ones(admin: WireClient,
                                                          subject: WireClient) -> None:
    case = Case(admin, subject)
    other = unique("other")
    for name in (case.topic, other):
        create_topic(admin, name)
        assert commit(admin, case.group, name).topics[0].partitions[0].error_code == NONE
    acls = [subject_acl(case, (G, Op.DESCRIBE)), subject_acl(case, (T, Op.DESCRIBE))]
    grant(admin, acls)
    try:
        resp = call(subject, ApiKey.OFFSET_FETCH, 7, group_id=case.group, topics=None,
                    require_stable=False)
        assert resp.error_code == NONE
        assert [t.name for t in resp.topics] == [case.topic]
        asked = call(subject, ApiKey.OFFSET_FETCH, 7, group_id=case.group, require_stable=False,
                     topics=[{"name": other, "partition_indexes": [0]},
                             {"name": case.topic, "partition_indexes": [0]}])
        found = {t.name: (t.partitions[0].error_code, t.partitions[0].committed_offset)
                 for t in asked.topics}
        assert found == {other: (E.topic_authorization_failed, -1), case.topic: (NONE, 1)}
        v1 = call(subject, ApiKey.OFFSET_FETCH, 1, group_id=unique("g"),
                  topics=[{"name": case.topic, "partition_indexes": [0, 1]}])
        assert [(p.partition_index, p.error_code) for p in v1.topics[0].partitions] == [
            (0, E.group_authorization_failed), (1, E.group_authorization_failed)]
    finally:
        revoke(admin, acls)


def test_authorized_operations(admin: WireClient, subject: WireClient) -> None:
    case = Case(admin, subject)
    _group_with_offsets(case)
    acls = [subject_acl(case, (T, Op.READ)), subject_acl(case, (T, Op.ALTER_CONFIGS)),
            subject_acl(case, (G, Op.DESCRIBE))]
    grant(admin, acls)

    def bits(*ops: AclOperation) -> int:
        return sum(1 << int(op) for op in ops)

    try:
        meta = call(subject, ApiKey.METADATA, 12, topics=[{"name": case.topic,
                                                           "topic_id": None}],
                    allow_auto_topic_creation=False, include_topic_authorized_operations=True)
        assert meta.topics[0].topic_authorized_operations == bits(
            Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)
        described = call(subject, ApiKey.DESCRIBE_GROUPS, 6, groups=[case.group],
                         include_authorized_operations=True)
        assert described.groups[0].authorized_operations == bits(Op.DESCRIBE)
        cluster = call(subject, ApiKey.DESCRIBE_CLUSTER, 1, endpoint_type=1,
                       include_cluster_authorized_operations=True)
        assert (cluster.error_code, cluster.cluster_authorized_operations) == (NONE, 0)
        old = call(subject, ApiKey.METADATA, 10, topics=[], allow_auto_topic_creation=False,
                   include_cluster_authorized_operations=True,
                   include_topic_authorized_operations=False)
        assert old.cluster_authorized_operations == 0
        on_cluster = [subject_acl(case, (C, op)) for op in (Op.DESCRIBE, Op.CREATE)]
        grant(admin, on_cluster)
        cluster = call(subject, ApiKey.DESCRIBE_CLUSTER, 1, endpoint_type=1,
                       include_cluster_authorized_operations=True)
        assert cluster.cluster_authorized_operations == bits(Op.DESCRIBE, Op.CREATE)
        revoke(admin, on_cluster)
    finally:
        revoke(admin, acls)


def test_create_topics_hides_configs_without_describe_configs(admin: WireClient,
                                                              subject: WireClient) -> None:
    case = Case(admin, subject)
    acls = [subject_acl(case, (T, Op.CREATE))]
    grant(admin, acls)
    try:
        resp = call(subject, ApiKey.CREATE_TOPICS, 7, timeout=10000, validate_only=False,
                    topics=[{"name": case.topic, "num_partitions": 2, "replication_factor": 1,
                             "assignments": [], "configs": []}])
        (t,) = resp.topics
        assert (t.error_code, t.topic_config_error_code, t.num_partitions, t.configs) == (
            NONE, E.topic_authorization_failed, -1, ())
        assert t.topic_id is not None
    finally:
        revoke(admin, acls)


def test_delete_topics_by_id_does_not_reveal_the_name(admin: WireClient,
                                                     subject: WireClient) -> None:
    case = Case(admin, subject)
    create_topic(admin, case.topic)
    meta = call(admin, ApiKey.METADATA, 12, topics=[{"name": case.topic, "topic_id": None}],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    topic_id = meta.topics[0].topic_id
    resp = call(subject, ApiKey.DELETE_TOPICS, 6, timeout=10000,
                topics=[{"name": None, "topic_id": topic_id}])
    (r,) = resp.responses
    assert (r.error_code, r.name, r.topic_id) == (E.topic_authorization_failed, None, topic_id)
    by_id = call(subject, ApiKey.METADATA, 12, topics=[{"name": None, "topic_id": topic_id}],
                 allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert (by_id.topics[0].error_code, by_id.topics[0].name) == (
        E.topic_authorization_failed, None)


@pytest.mark.parametrize("way", ["SCRAM-SHA-256", "mTLS"])
def test_deny_wins_and_hosts_match_exactly_or_by_cidr_range(
        secure: Secure, admin: WireClient, way: str) -> None:
    """The subject's ACLs decide alike whether it logs in with SCRAM or a certificate."""
    subject = secure.connect(SUBJECT, way, source=SUBJECT_HOST)
    case = Case(admin, subject)
    create_topic(admin, case.topic)
    in_range = subject_acl(case, (T, Op.WRITE), host="127.0.0.0/24")
    out_of_range = subject_acl(case, (T, Op.WRITE), host="10.0.0.0/8")
    everyone_denied = AclBinding(T, case.topic[:3], PatternType.PREFIXED, "User:*", "*",
                                 Op.WRITE, DENY)

    def produced(c: WireClient) -> int:
        return int(produce(c, case.topic).responses[0].partition_responses[0].error_code)

    try:
        grant(admin, [out_of_range])
        assert produced(subject) == E.topic_authorization_failed
        grant(admin, [in_range])
        assert produced(subject) == NONE
        grant(admin, [everyone_denied])
        assert produced(subject) == E.topic_authorization_failed
        # a super user is not subject to ACLs, not even to a DENY of User:*
        assert produced(admin) == NONE
    finally:
        revoke(admin, [in_range, out_of_range, everyone_denied])
        subject.close()


def test_a_regex_subscription_is_assigned_only_describable_topics(
        admin: WireClient, subject: WireClient) -> None:
    """KAFKA-18813: the regex resolves among the topics the member may DESCRIBE."""
    case = Case(admin, subject)
    seen, unseen = unique("rx-seen"), unique("rx-unseen")
    for name in (seen, unseen):
        create_topic(admin, name, partitions=2)
    acls = [subject_acl(case, (G, Op.READ)),
            AclBinding(T, seen, PatternType.LITERAL, SUBJECT, SUBJECT_HOST, Op.DESCRIBE, ALLOW)]
    grant(admin, acls)
    try:
        regex = f"rx-(seen|unseen)-({seen[-8:]}|{unseen[-8:]})"
        resp = heartbeat(subject, case.group, subscribed_topic_regex=regex)
        assert resp.error_code == NONE, resp
        meta = call(admin, ApiKey.METADATA, 12, topics=[{"name": n, "topic_id": None}
                                                        for n in (seen, unseen)],
                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        ids = {t.topic_id: t.name for t in meta.topics}
        member_id, epoch = resp.member_id, resp.member_epoch
        assigned: dict[str, list[int]] = {}
        deadline = time.monotonic() + 10
        while not assigned and time.monotonic() < deadline:
            if resp.assignment is not None:
                assigned = {ids[t.topic_id]: sorted(t.partitions)
                            for t in resp.assignment.topic_partitions}
            if not assigned:
                time.sleep(0.05)
                resp = heartbeat(subject, case.group, member_id=member_id, member_epoch=epoch,
                                 rebalance_timeout=-1, topic_partitions=None)
                epoch = resp.member_epoch
        assert assigned == {seen: [0, 1]}
        denied = heartbeat(subject, unique("g"), subscribed_topic_names=[seen, unseen])
        assert denied.error_code in (E.topic_authorization_failed, E.group_authorization_failed)
    finally:
        revoke(admin, acls)


# ---- the ACL APIs ---------------------------------------------------------------------------


def test_acl_apis_refuse_bad_input_with_kafkas_errors(admin: WireClient) -> None:
    who = f"User:{unique('acl')}"
    good = AclBinding(T, unique("acl"), PatternType.PREFIXED, who, "10.0.0.0/8", Op.READ,
                      ALLOW)
    everything = AclBinding(T, "*", PatternType.LITERAL, who, "10.0.0.1", Op.READ, ALLOW)
    bad = [AclBinding(T, "x", PatternType.MATCH, "User:alice", "*", Op.READ, ALLOW),
           AclBinding(T, "x", PatternType.LITERAL, "alice", "*", Op.READ, ALLOW),
           AclBinding(C, "my-cluster", PatternType.LITERAL, "User:a", "*", Op.ALTER, ALLOW),
           AclBinding(T, "x", PatternType.LITERAL, "User:a", "10.0.0.0/40", Op.READ, ALLOW),
           AclBinding(T, "x", PatternType.LITERAL, "User:a", "*", Op.ANY, ALLOW)]
    resp = call(admin, ApiKey.CREATE_ACLS, 3,
                creations=[acl_body(b) for b in [good, everything, *bad]])
    codes = [r.error_code for r in resp.results]
    assert codes == [NONE, NONE] + [E.invalid_request] * len(bad)
    assert all(r.error_message for r in resp.results[2:])
    listed = call(admin, ApiKey.DESCRIBE_ACLS, 1, resource_type_filter=int(T),
                  resource_name_filter=good.name + "-and-more",
                  pattern_type_filter=int(PatternType.MATCH), principal_filter=who,
                  host_filter=None, operation=int(Op.ANY),
                  permission_type=int(AclPermissionType.ANY))
    assert [(r.resource_name, r.pattern_type, [a.host for a in r.acls])
            for r in listed.resources] == [("*", PatternType.LITERAL, ["10.0.0.1"]),
                                           (good.name, PatternType.PREFIXED, ["10.0.0.0/8"])]
    unknown = call(admin, ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=99,
                   resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                   host_filter=None, operation=1, permission_type=1)
    assert (unknown.error_code, unknown.error_message) == (E.invalid_request,
                                                           "Unknown patternFilter.")
    deleted = call(admin, ApiKey.DELETE_ACLS, 2, filters=[
        {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 0,
         "permission_type": 1},
        {"resource_type_filter": int(T), "resource_name_filter": None,
         "pattern_type_filter": int(PatternType.ANY), "principal_filter": who,
         "host_filter": None, "operation": 1, "permission_type": 1}])
    first, second = deleted.filter_results
    assert (first.error_code, first.error_message) == (E.invalid_request,
                                                       "Unknown entryFilter.")
    assert second.error_code == NONE
    assert sorted((m.resource_name, m.principal) for m in second.matching_acls) == [
        ("*", who), (good.name, who)]


def test_acl_apis_without_an_authorizer_are_security_disabled(broker: BrokerProcess) -> None:
    client = WireClient(broker.bootstrap)
    f = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    described = call(client, ApiKey.DESCRIBE_ACLS, 3, **f)
    assert (described.error_code, described.error_message) == (
        E.security_disabled, "No Authorizer is configured.")
    created = call(client, ApiKey.CREATE_ACLS, 3, creations=[acl_body(AclBinding(
        T, "t", PatternType.LITERAL, "User:a", "*", Op.READ, ALLOW))])
    assert created.results[0].error_code == E.security_disabled
    deleted = call(client, ApiKey.DELETE_ACLS, 3, filters=[f])
    assert deleted.filter_results[0].error_code == E.security_disabled
    client.close()


def test_acls_persist_and_denials_are_logged_and_counted(secure: Secure,
                                                         tmp_path: Path) -> None:
    data = tmp_path / "data"
    prepare(data)
    offline = len(FileAclStore(data).read())
    proc = BrokerProcess(data, secure.config)
    proc.extra_args = ["--metrics-port", "0"]
    proc.start()
    try:
        admin = secure.connect(ADMIN, broker=proc)
        subject = secure.connect(SUBJECT, "SCRAM-SHA-256", source=SUBJECT_HOST, broker=proc)
        topic = unique("persist")
        create_topic(admin, topic)
        writer = AclBinding(T, topic, PatternType.LITERAL, SUBJECT, SUBJECT_HOST, Op.WRITE,
                            ALLOW)
        grant(admin, [writer])
        for _ in range(3):
            assert produce(subject, topic).responses[0].partition_responses[0].error_code \
                == NONE
            assert _join(Case(admin, subject)) == E.group_authorization_failed
        for c in (admin, subject):
            c.close()
        samples = scrape(proc)
        assert samples[("samsa_authorization_denials_total", frozenset(
            {("api", "JoinGroup"), ("resource_type", "GROUP"), ("operation", "READ")}))] == 3
        assert samples[("samsa_acls", frozenset())] == offline + 1
        assert proc.stop() == 0
        log = proc.log_path.read_text()
        denials = re.findall(r"Principal = User:subject is Denied operation = READ from "
                             r"host = 127\.0\.0\.1 on resource = Group:LITERAL:g-\w+ for "
                             r"request = JoinGroup", log)
        assert len(denials) == 3  # three groups: each logged once
        proc.start()  # the ACLs come back from the data directory
        subject = secure.connect(SUBJECT, "mTLS", source=SUBJECT_HOST, broker=proc)
        assert produce(subject, topic).responses[0].partition_responses[0].error_code == NONE
        subject.close()
    finally:
        proc.kill()


def scrape(proc: BrokerProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    deadline = time.monotonic() + 10
    while True:
        found = re.search(r"metrics on http://[\d.]+:(\d+)/metrics", proc.log_path.read_text())
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert found, "no metrics port in the log"
    with urllib.request.urlopen(f"http://127.0.0.1:{found.group(1)}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
