"""The principals of the secure test broker, and helpers of the authorization tests.

The ``secure`` broker (:mod:`tests.security.conftest`) authenticates every connection (TLS,
mTLS, SASL) and runs Kafka's authorizer with ``allow.everyone.if.no.acl.found=false`` and
``super.users=User:admin``. Before it first starts, :func:`prepare` makes its users and its
first ACLs offline, as an operator would (``samsa users add``, ``samsa acls add --data-dir``):

* ``User:admin`` (:data:`ADMIN`): the super user. Creates topics and grants ACLs.
* ``User:subject`` (:data:`SUBJECT`): may do only what a test grants it, from
  :data:`SUBJECT_HOST` (the authorization matrix; ACLs name that host, so host matching is
  tested with real principals too).
* ``User:alice`` (:data:`APP`): the application. WRITE, READ and CREATE on topics starting
  ``app-``, READ on groups starting ``app-``.
* ``User:bob`` (:data:`READER`): READ on topics starting ``app-`` and nothing else: no WRITE
  on any topic, no READ on any group.
* ``User:ops`` (:data:`OPS`): DESCRIBE on the cluster (lists ACLs and every group).

Each has both SCRAM credentials (a PLAIN login is checked against them); alice, bob and the
subject also have client certificates (``CN=<name>,OU=eng,O=samsa`` maps to ``User:<name>``),
and alice and bob OAuth tokens. Tests that need a principal told apart by address alone (a
broker without authentication, as the cluster's ACL test) use :data:`ANONYMOUS` from
:data:`ADMIN_HOST` and :data:`SUBJECT_HOST`.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import uuid
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from samsa.cli.main import main as samsa_cli
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
)
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
ADMIN, SUBJECT, APP, READER, OPS = ("User:admin", "User:subject", "User:alice", "User:bob",
                                    "User:ops")
ANONYMOUS = "User:ANONYMOUS"
SUBJECT_HOST, ADMIN_HOST = "127.0.0.1", "127.0.0.2"
APP_PREFIX = "app-"
"""Topics and groups the application may use start so."""
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DENIED = {T: E.topic_authorization_failed, G: E.group_authorization_failed,
          C: E.cluster_authorization_failed, X: E.transactional_id_authorization_failed}
SECURED = {**FAST_GROUPS, "authorizer.class.name": AUTHORIZER,
           "allow.everyone.if.no.acl.found": "false", "offsets.topic.num.partitions": "3"}
"""The authorizer's settings (``super.users`` is added where principals are authenticated)."""


def name_of(principal: str) -> str:
    return principal.partition(":")[2]


def password(principal: str) -> str:
    """Every test user's password: ``<name>-secret``."""
    return f"{name_of(principal)}-secret"


def samsa(*argv: str) -> subprocess.CompletedProcess[str]:
    """A ``samsa`` command, run in this process: its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = samsa_cli(list(argv))
        except SystemExit as exc:  # argparse refused the arguments
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(["samsa", *argv], code, out.getvalue(), err.getvalue())


def run_cli(*argv: str) -> None:
    """A ``samsa`` command that must succeed."""
    done = samsa(*argv)
    assert done.returncode == 0, (argv, done.stderr)


def prepare(data_dir: Path) -> None:
    """The users and first ACLs of a secure broker's data directory, made offline as the
    operator's guide (docs/security.md) says, before the broker first starts."""
    for principal in (ADMIN, SUBJECT, APP, READER, OPS):
        for mechanism in SCRAM:
            run_cli("users", "add", "--data-dir", str(data_dir), "--mechanism", mechanism,
                 "--user", name_of(principal), "--password", password(principal))
    acls = ["acls", "add", "--data-dir", str(data_dir)]
    run_cli(*acls, "--producer", "--consumer", "--topic", APP_PREFIX, "--group", APP_PREFIX,
         "--resource-pattern-type", "prefixed", "--allow-principal", APP)
    run_cli(*acls, "--topic", APP_PREFIX, "--resource-pattern-type", "prefixed",
         "--operation", "Read", "--allow-principal", READER)
    run_cli(*acls, "--cluster", "--operation", "Describe", "--allow-principal", OPS)


def app_name(kind: str) -> str:
    """A fresh topic or group name the application may use."""
    return unique(f"{APP_PREFIX}{kind}")


def call(c: WireClient, api: ApiKey, version: int, **fields: Any) -> Any:
    return c.call(api, version, build(load_request_schema(api, version), fields))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


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


