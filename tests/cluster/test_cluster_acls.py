"""ACLs in a cluster: kept in PostgreSQL, granted before the nodes start (``samsa acls add
--storage``), and a change made through one node applies on every node (a NOTIFY wakes
their cluster tick; the tick runs at least every second anyway)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from samsa.cli.main import main
from samsa.protocol.api_keys import ApiKey
from samsa.security.acl import AclBinding, PatternType
from tests.cluster.nodes import ClusterNodeProcess
from tests.security.kit import (
    ADMIN_HOST,
    ALLOW,
    ANONYMOUS,
    NONE,
    SECURED,
    SUBJECT_HOST,
    E,
    Op,
    T,
    call,
    create_topic,
    grant,
    revoke,
    unique,
)
from tests.wire import WireClient


def described(c: WireClient, topic: str) -> int:
    resp = call(c, ApiKey.METADATA, 12, topics=[{"name": topic, "topic_id": None}],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return int(resp.topics[0].error_code)


def settles_to(check: int, read: Callable[[], int], limit: float = 5.0) -> float:
    """Seconds until ``read()`` answers ``check`` (fails after ``limit``)."""
    started = time.monotonic()
    while (got := read()) != check:
        assert time.monotonic() - started < limit, f"still {got} after {limit}s"
        time.sleep(0.02)
    return time.monotonic() - started


def test_acls_live_in_the_database_and_changes_reach_every_node(tmp_path: Path,
                                                                pg_dsn: str) -> None:
    for resource in ("--cluster", "--topic=*", "--group=*"):
        assert main(["acls", "add", "--storage", pg_dsn, resource, "--allow-principal",
                     ANONYMOUS, "--allow-host", ADMIN_HOST, "--operation", "All"]) == 0
    nodes = [ClusterNodeProcess(tmp_path, i, pg_dsn, SECURED) for i in (1, 2)]
    try:
        for node in nodes:
            node.start()
        admin = WireClient(nodes[0].bootstrap, source=ADMIN_HOST)
        subject = WireClient(nodes[1].bootstrap, source=SUBJECT_HOST)
        topic = unique("acl-cluster")
        create_topic(admin, topic)
        assert described(subject, topic) == E.topic_authorization_failed
        reader = AclBinding(T, topic, PatternType.LITERAL, ANONYMOUS, SUBJECT_HOST, Op.READ,
                            ALLOW)
        grant(admin, [reader])  # through node 1; the subject asks node 2
        settles_to(NONE, lambda: described(subject, topic))
        revoke(admin, [reader])
        settles_to(E.topic_authorization_failed, lambda: described(subject, topic))
        assert main(["acls", "list", "--storage", pg_dsn, "--topic", topic]) == 0
        for c in (admin, subject):
            c.close()
    finally:
        for node in nodes:
            node.kill()
