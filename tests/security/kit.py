"""Helpers of the authorization tests: a broker with Kafka's authorizer, and raw requests
of an administrator and a subject told apart by their address.

Until authentication lands every connection is ``User:ANONYMOUS``, so the administrator
connects from 127.0.0.2 (granted ALL offline, before the broker starts: the ACL file a
``samsa acls add --data-dir`` writes) and the subject from 127.0.0.1 with only the ACLs a
test grants it. Once principals come from SASL or TLS, the subject becomes a principal of its
own: only :data:`SUBJECT`, :data:`SUBJECT_HOST` and the fixtures change.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
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
from tests.conftest import FAST_GROUPS
from tests.records import make_batch
from tests.wire import WireClient

Op = AclOperation
T, G, C, X = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
              ResourceType.TRANSACTIONAL_ID)
E = ErrorCode
NONE = E.none
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUBJECT, SUBJECT_HOST = "User:ANONYMOUS", "127.0.0.1"
ADMIN, ADMIN_HOST = "User:ANONYMOUS", "127.0.0.2"
DENIED = {T: E.topic_authorization_failed, G: E.group_authorization_failed,
          C: E.cluster_authorization_failed, X: E.transactional_id_authorization_failed}
SECURED = {**FAST_GROUPS, "authorizer.class.name": AUTHORIZER,
           "allow.everyone.if.no.acl.found": "false", "offsets.topic.num.partitions": "3"}


def call(c: WireClient, api: ApiKey, version: int, **fields: Any) -> Any:
    return c.call(api, version, build(load_request_schema(api, version), fields))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin_acls() -> list[AclBinding]:
    """What the administrator may do: everything, from its own address."""
    return [AclBinding(rtype, CLUSTER_NAME if rtype == C else "*", PatternType.LITERAL, ADMIN,
                       ADMIN_HOST, Op.ALL, ALLOW) for rtype in (T, G, C, X)]


def secured_broker(data_dir: Path, acls: Iterable[AclBinding] = (),
                   **config: str) -> BrokerProcess:
    """A broker (not started) with the authorizer on, nothing allowed by default, and the
    administrator's ACLs (and ``acls``) written offline, as ``samsa acls add --data-dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    FileAclStore(data_dir).write([*admin_acls(), *acls])
    return BrokerProcess(data_dir, {**SECURED, **config})


# ---- what the administrator does for the cases ------------------------------------------


def acl_body(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": int(b.resource_type), "resource_name": b.name,
            "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
            "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission)}


def grant(admin: WireClient, acls: list[AclBinding]) -> None:
    if acls:
        resp = call(admin, ApiKey.CREATE_ACLS, 3, creations=[acl_body(b) for b in acls])
        assert [r.error_code for r in resp.results] == [NONE] * len(acls), resp


def revoke(admin: WireClient, acls: list[AclBinding]) -> None:
    filters = [{"resource_type_filter": int(b.resource_type), "resource_name_filter": b.name,
                "pattern_type_filter": int(b.pattern_type), "principal_filter": b.principal,
                "host_filter": b.host, "operation": int(b.operation),
                "permission_type": int(b.permission)} for b in acls]
    resp = call(admin, ApiKey.DELETE_ACLS, 3, filters=filters)
    assert all(r.error_code == NONE for r in resp.filter_results), resp


def create_topic(admin: WireClient, name: str, partitions: int = 1) -> None:
    resp = call(admin, ApiKey.CREATE_TOPICS, 7, timeout=10000, validate_only=False, topics=[
        {"name": name, "num_partitions": partitions, "replication_factor": 1,
         "assignments": [], "configs": []}])
    assert resp.topics[0].error_code == NONE, resp


def commit(c: WireClient, group: str, topic: str, offset: int = 1) -> Any:
    return call(c, ApiKey.OFFSET_COMMIT, 9, group_id=group, generation_id_or_member_epoch=-1,
                member_id="", group_instance_id=None, topics=[
                    {"name": topic, "partitions": [{"partition_index": 0,
                                                     "committed_offset": offset,
                                                     "committed_leader_epoch": -1,
                                                     "committed_metadata": ""}]}])


def produce(c: WireClient, topic: str) -> Any:
    return call(c, ApiKey.PRODUCE, 9, transactional_id=None, acks=1, timeout=5000,
                topic_data=[{"name": topic, "partition_data": [
                    {"index": 0, "records": make_batch([(b"k", b"v")])}]}])


def heartbeat(c: WireClient, group: str, **fields: Any) -> Any:
    body = dict(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, instance_id=None,
                rack_id=None, rebalance_timeout=30000, subscribed_topic_names=None,
                subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])
    return call(c, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, **{**body, **fields})


