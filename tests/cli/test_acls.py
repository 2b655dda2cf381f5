"""``samsa acls add/list/remove``: on a stopped broker's data directory (the first
administrator), against a running broker with an authorizer (samsa.Admin's CreateAcls,
DescribeAcls, DeleteAcls), and the one-line errors of bad input and of a broker without one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.client import Admin
from samsa.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.security.authorizer import FileAclStore
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, parse_table, unique
from tests.security.kit import SECURED

ME = "User:ANONYMOUS"  # the CLI's principal until authentication lands
ALLOW = AclPermissionType.ALLOW


def rows(out: str) -> set[tuple[str, ...]]:
    return {(r["PRINCIPAL"], r["HOST"], r["OPERATION"], r["PERMISSION"], r["RESOURCE"],
             r["NAME"], r["PATTERN"]) for r in parse_table(out)}


def test_offline_on_a_data_directory(cli: CLI, tmp_path: Path) -> None:
    data = str(tmp_path)
    added = cli("acls", "add", "--data-dir", data, "--consumer", "--topic", "orders",
                "--group", "billing", "--allow-principal", "User:alice", "--allow-host",
                "10.0.0.0/8", "--deny-principal", "User:mallory", "--operation", "describe",
                bootstrap=False)
    assert added.rc == 0, added.err
    listed = cli("acls", "list", "--data-dir", data, "-o", "json", bootstrap=False)
    got = {(a["principal"], a["host"], a["operation"], a["permission"], a["resource_type"],
            a["name"]) for a in listed.json()}
    assert got == {
        ("User:alice", "10.0.0.0/8", "READ", "ALLOW", "TOPIC", "orders"),
        ("User:alice", "10.0.0.0/8", "DESCRIBE", "ALLOW", "TOPIC", "orders"),
        ("User:alice", "10.0.0.0/8", "READ", "ALLOW", "GROUP", "billing"),
        ("User:alice", "10.0.0.0/8", "DESCRIBE", "ALLOW", "GROUP", "billing"),
        ("User:mallory", "*", "READ", "DENY", "TOPIC", "orders"),  # as kafka-acls.sh: the
        ("User:mallory", "*", "DESCRIBE", "DENY", "TOPIC", "orders"),  # shortcuts and the
        ("User:mallory", "*", "READ", "DENY", "GROUP", "billing"),  # operations go to both
        ("User:mallory", "*", "DESCRIBE", "DENY", "GROUP", "billing"),  # sides
    }
    assert len(FileAclStore(tmp_path).read()) == 8  # what the broker loads at start
    removed = cli("acls", "remove", "--data-dir", data, "--group", "billing",
                  bootstrap=False)
    assert removed.rc == 0 and "Removed 4 ACL(s)." in removed.out
    left = cli("acls", "list", "--data-dir", data, "--principal", "User:alice",
               bootstrap=False)
    assert {r[4] for r in rows(left.out)} == {"TOPIC"}


@pytest.mark.parametrize(("argv", "message"), [
    (["--topic", "t", "--allow-principal", "User:a", "--operation", "reed"],
     "unknown operation 'reed'"),
    (["--topic", "t", "--allow-principal", "User:a", "--allow-host", "10.0.0.0/33",
      "--operation", "read"], "Invalid host '10.0.0.0/33'"),
    (["--topic", "t", "--allow-principal", "alice", "--operation", "read"],
     "Could not parse principal"),
    (["--allow-principal", "User:a", "--operation", "read"], "name a resource"),
    (["--topic", "t", "--operation", "read"], "name an --allow-principal"),
    (["--topic", "t", "--allow-host", "1.2.3.4", "--operation", "read"],
     "--allow-host needs --allow-principal"),
])
def test_bad_input_is_one_line(cli: CLI, tmp_path: Path, argv: list[str], message: str) -> None:
    run = cli("acls", "add", "--data-dir", str(tmp_path), *argv, bootstrap=False)
    assert run.rc == 2
    assert message in run.err and len(run.err.strip().splitlines()) == 1, run.err
    assert FileAclStore(tmp_path).read() == []


def test_a_broker_without_an_authorizer(cli: CLI) -> None:
    run = cli("acls", "list")
    assert run.rc == 1
    assert "security_disabled" in run.err.lower()
    assert "the broker has no authorizer (authorizer.class.name)" in run.err


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose ACLs let the CLI's connections (127.0.0.1) manage ACLs."""
    data = tmp_path_factory.mktemp("cli-acls") / "data"
    data.mkdir()
    FileAclStore(data).write([AclBinding(ResourceType.CLUSTER, CLUSTER_NAME,
                                         PatternType.LITERAL, ME, "127.0.0.1", op, ALLOW)
                              for op in (AclOperation.ALTER, AclOperation.DESCRIBE)])
    proc = BrokerProcess(data, SECURED).start()
    yield proc
    assert proc.stop() == 0


def test_online_through_the_broker(cli: CLI, secured: BrokerProcess) -> None:
    topic = unique("orders")
    added = cli("acls", "add", "--topic", topic, "--resource-pattern-type", "prefixed",
                "--producer", "--idempotent", "--allow-principal", "User:bob",
                bootstrap=secured.bootstrap)
    assert added.rc == 0, added.err
    assert rows(added.out) == {
        ("User:bob", "*", op, "ALLOW", "TOPIC", topic, "PREFIXED")
        for op in ("WRITE", "DESCRIBE", "CREATE")} | {
        ("User:bob", "*", "IDEMPOTENT_WRITE", "ALLOW", "CLUSTER", CLUSTER_NAME, "LITERAL")}
    match = cli("acls", "list", "--topic", f"{topic}-eu", "--resource-pattern-type", "match",
                "--principal", "User:bob", bootstrap=secured.bootstrap)
    assert {r[2] for r in rows(match.out)} == {"WRITE", "DESCRIBE", "CREATE"}
    with Admin(secured.bootstrap) as admin:  # the same ACLs through samsa.Admin
        found = admin.describe_acls(AclBindingFilter(principal="User:bob"))
        assert len(found) == 4
        removed = admin.delete_acls([AclBindingFilter(ResourceType.CLUSTER, principal="User:bob")])
        assert [b.principal for b in removed] == ["User:bob"]
    gone = cli("acls", "remove", "--topic", topic, "--resource-pattern-type", "prefixed",
               "--allow-principal", "User:bob", "--operation", "Create",
               bootstrap=secured.bootstrap)
    assert gone.rc == 0 and "Removed 1 ACL(s)." in gone.out
    left = cli("acls", "list", "--principal", "User:bob", "-o", "json",
               bootstrap=secured.bootstrap)
    assert sorted(a["operation"] for a in left.json()) == ["DESCRIBE", "WRITE"]
