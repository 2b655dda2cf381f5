"""The console honours the security model: it acts as its principal.

A secured broker (the ``secure`` settings of :mod:`tests.security.conftest`: SASL_SSL, mTLS,
Kafka's authorizer) whose console acts as ``User:bob``. bob may READ the topics ``app-*``
and, here, DESCRIBE the groups ``app-seen`` and ``app-share`` (a share group); nothing else.
So the console lists only those groups and, in them (lag, share partitions), only the topics
bob may DESCRIBE; another group answers 403; a preview of
an offset reset works and executing it is refused (OffsetCommit needs READ on the group)
until an administrator grants it. ``samsa console --command-config`` against the SASL_SSL
and the mTLS listener acts with bob's credentials, and the cluster's ACLs apply alike.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.protocol.api_keys import ApiKey
from samsa.security.acl import AclBinding, PatternType
from tests.brokerproc import BrokerProcess, end_process
from tests.security.conftest import Secure, secure  # noqa: F401 - the session's PKI and settings
from tests.security.kit import (
    ADMIN,
    ALLOW,
    READER,
    G,
    Op,
    call,
    commit,
    create_topic,
    grant,
    prepare,
    produce,
    run_cli,
)
from tests.wire import WireClient

from .conftest import CONSOLE, api, http_url, wait_for

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

SEEN, OTHER, HIDDEN_GROUP = "app-seen", "app-other", "zz-hidden"
SHARE_SEEN, SHARE_HIDDEN = "app-share", "zz-share"
TOPIC, HIDDEN_TOPIC = "app-t", "hidden-t"


@pytest.fixture(scope="module")
def secured(secure: Secure, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
            ) -> Iterator[tuple[BrokerProcess, str, WireClient]]:
    """(the broker, its console's URL, the super user's connection): topics ``app-t``
    (3 records) and ``hidden-t`` (1), groups ``app-seen`` (offsets in both topics),
    ``app-other`` and ``zz-hidden`` (in ``app-t``), share groups ``app-share`` and
    ``zz-share`` (made by AlterShareGroupOffsets, with share partitions of both topics)."""
    data = tmp_path_factory.mktemp("secured-console") / "data"
    prepare(data)
    for group in (SEEN, SHARE_SEEN):
        run_cli("acls", "add", "--data-dir", str(data), "--group", group, "--operation",
                "Describe", "--allow-principal", READER)
    proc = BrokerProcess(data, {**secure.config, **CONSOLE, "console.principal": READER,
                                "console.actions.enable": "true"},
                         extra_args=["--metrics-port", "0"]).start()
    admin = secure.connect(ADMIN, broker=proc)
    try:
        for topic, records in ((TOPIC, 3), (HIDDEN_TOPIC, 1)):
            create_topic(admin, topic)
            for _ in range(records):
                assert produce(admin, topic).responses[0].partition_responses[0].error_code == 0
        for group, topics in ((SEEN, (TOPIC, HIDDEN_TOPIC)), (OTHER, (TOPIC,)),
                              (HIDDEN_GROUP, (TOPIC,))):
            for topic in topics:
                assert commit(admin, group, topic, 1).topics[0].partitions[0].error_code == 0
        for group in (SHARE_SEEN, SHARE_HIDDEN):  # share partitions of both topics
            assert call(admin, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=[
                {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 1}]}
                for t in (TOPIC, HIDDEN_TOPIC)]).error_code == 0
        yield proc, http_url(proc), admin
    finally:
        admin.close()
        assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


def groups(base: str) -> set[str]:
    status, body = api(base, "/groups")
    assert status == 200, body
    return {g["group_id"] for g in body["groups"]}


def lag_topics(base: str, group: str) -> set[str] | None:
    status, body = api(base, f"/groups/{group}/lag")
    assert status == 200, body
    return {p["topic"] for p in body["partitions"]} or None


def test_the_console_shows_only_what_its_principal_may_describe(
        secured: tuple[BrokerProcess, str, WireClient]) -> None:
    _, base, _ = secured
    _, info = api(base, "")
    assert info["principal"] == READER
    # the share groups exist since their offsets were altered (as Kafka creates them)
    assert groups(base) == {SEEN, SHARE_SEEN}
    assert api(base, f"/groups/{SEEN}")[0] == 200
    for path in ("", "/history", "/lag"):
        status, body = api(base, f"/groups/{OTHER}{path}")
        assert status == 403 and "not authorized to DESCRIBE group app-other" in body["error"]
    assert api(base, f"/stream?group={HIDDEN_GROUP}")[0] == 403
    assert wait_for(lambda: lag_topics(base, SEEN), what="a lag sample") == {TOPIC}
    status, body = api(base, f"/groups/{SHARE_SEEN}/share-partitions")
    assert status == 200, body
    assert [(p["topic"], p["start_offset"]) for p in body["partitions"]] == [(TOPIC, 1)]
    assert api(base, f"/groups/{SHARE_HIDDEN}/share-partitions")[0] == 403


def test_an_offset_reset_needs_read_on_the_group(
        secured: tuple[BrokerProcess, str, WireClient]) -> None:
    """A preview needs DESCRIBE (bob has it) and plans only the topics bob may DESCRIBE;
    executing needs READ on the group, as Kafka's OffsetCommit: refused with what is
    missing, then executed once an administrator grants it. Every attempt is audited, and
    the audit shows only the groups bob may see."""
    _, base, admin = secured
    status, body = api(base, f"/groups/{SEEN}/offsets/preview", {"mode": "earliest"})
    assert status == 200 and body["refused"] is None, body
    assert body["partitions"] == [{"topic": TOPIC, "partition": 0, "current": 1, "new": 0}]
    status, body = api(base, f"/groups/{SEEN}/offsets/reset", {"mode": "earliest"})
    assert status == 403, body
    assert "User:bob is not authorized" in body["error"] and "READ on the group" in body["error"]
    assert "group_authorization_failed" in body["error"]
    assert api(base, f"/groups/{OTHER}/offsets/preview", {"mode": "earliest"})[0] == 403
    grant(admin, [AclBinding(G, SEEN, PatternType.LITERAL, READER, "*", Op.READ, ALLOW)])
    status, body = api(base, f"/groups/{SEEN}/offsets/reset", {"mode": "earliest"})
    assert status == 200 and body["executed"], body
    status, body = api(base, f"/groups/{SEEN}/offsets/preview", {"mode": "current"})
    assert body["partitions"][0]["current"] == 0
    entries = api(base, "/audit")[1]["entries"]
    assert {e["group"] for e in entries} == {SEEN}
    assert [e["result"] for e in entries] == ["previewed", "executed", "refused", "previewed"]
    assert all(e["principal"] == READER for e in entries)


@pytest.mark.parametrize("way", ["SCRAM-SHA-512", "mTLS"])
def test_samsa_console_acts_with_the_credentials_of_its_command_config(
        secure: Secure, secured: tuple[BrokerProcess, str, WireClient],  # noqa: F811
        tmp_path: Path, way: str) -> None:
    proc, _, _ = secured
    listener = "SSL" if way == "mTLS" else "SASL_SSL"
    props = secure.properties(tmp_path, "bob", way)
    cmd = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli.main", "console", "--bootstrap-server",
         proc.address(listener), "--command-config", str(props), "--listen", "127.0.0.1:0",
         "--interval", "0.3", "--audit-log", str(tmp_path / "audit.log"),
         *(["--principal", READER] if way == "mTLS" else [])],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = _console_url(cmd)
        _, info = api(base, "")
        assert info["source"] == "cluster"
        assert info["principal"] == READER  # mTLS: as given (the broker maps the subject)
        row = wait_for(lambda: next((g for g in api(base, "/groups")[1]["groups"]
                                     if g["lag"]["verdict"]), None), what="a sampled group")
        # ListGroups answers what bob may DESCRIBE
        assert groups(base) == {SEEN, SHARE_SEEN}
        assert row["group_id"] == SEEN and row["lag"]["seconds"] > 0  # a fetch as bob
        assert lag_topics(base, SEEN) == {TOPIC}
        status, body = api(base, f"/groups/{SEEN}/offsets/preview", {"mode": "latest"})
        assert status == 200 and [p["topic"] for p in body["partitions"]] == [TOPIC], body
        status, body = api(base, f"/groups/{OTHER}")
        assert status == 403, body
    finally:
        end_process(cmd)


def _console_url(cmd: subprocess.Popen[str], timeout: float = 30) -> str:
    assert cmd.stdout is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    for line in cmd.stdout:
        seen.append(line)
        if "samsa console on http://" in line:
            return line.split("on ", 1)[1].strip().removesuffix("/console/")
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"samsa console did not start: {''.join(seen)}")
