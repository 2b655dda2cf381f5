"""The CLI's ``--command-config``: Kafka client properties for TLS and SASL, as Kafka's tools;
each command acts as the principal the properties log in as, with its ACLs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.security.conftest import PASSWORD, Secure
from tests.security.kit import APP, OPS, READER, app_name, commit, name_of, password, samsa

pytestmark = pytest.mark.conformance




def _properties(tmp: Path, secure: Secure, password: str, user: str = "alice") -> Path:
    return secure.properties(tmp, user, secret=password)


def _as(tmp: Path, secure: Secure, principal: str) -> list[str]:
    props = _properties(tmp, secure, password(principal), name_of(principal))
    return ["--bootstrap-server", secure.address("SASL_SSL"), "--command-config", str(props)]


def test_command_config_authenticates_the_cli(secure: Secure, tmp_path: Path) -> None:
    props = _properties(tmp_path, secure, PASSWORD)
    topic = f"app-cli-{uuid.uuid4().hex[:6]}"  # alice may create topics starting app-
    common = ["--bootstrap-server", secure.address("SASL_SSL"), "--command-config", str(props)]
    assert samsa("topics", "create", topic, "--partitions", "2", *common).returncode == 0
    assert topic in samsa("topics", "list", *common).stdout


def test_command_config_with_a_wrong_password_fails_in_one_line(secure: Secure,
                                                                 tmp_path: Path) -> None:
    props = _properties(tmp_path, secure, "wrong")
    done = samsa("topics", "list", "--bootstrap-server", secure.address("SASL_SSL"),
                 "--command-config", str(props), "--timeout", "5")
    assert done.returncode != 0
    assert "invalid credentials" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_command_config_errors_are_clear(secure: Secure, tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n")
    done = samsa("topics", "list", "--bootstrap-server", secure.address("SASL_SSL"),
                 "--command-config", str(props))
    assert done.returncode == 2 and "needs a username and a password" in done.stderr


def test_acls_list_needs_describe_on_the_cluster(secure: Secure, tmp_path: Path) -> None:
    listed = samsa("acls", "list", "--principal", APP, "-o", "json",
                   *_as(tmp_path, secure, OPS))
    assert listed.returncode == 0, listed.stderr
    assert {(a["resource_type"], a["name"], a["operation"]) for a in json.loads(listed.stdout)} \
        >= {("TOPIC", "app-", "WRITE"), ("GROUP", "app-", "READ")}
    refused = samsa("acls", "list", *_as(tmp_path, secure, READER))
    assert refused.returncode == 1 and "Cluster authorization failed" in refused.stderr, \
        refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_groups_describe_needs_describe_on_the_group(secure: Secure, tmp_path: Path) -> None:
    topic, group = app_name("cli"), app_name("g")
    alice = secure.connect(APP)
    try:
        assert samsa("topics", "create", topic, "--partitions", "1",
                     *_as(tmp_path, secure, APP)).returncode == 0
        assert commit(alice, group, topic, 0).topics[0].partitions[0].error_code == 0
    finally:
        alice.close()
    described = samsa("groups", "describe", group, "-o", "json", *_as(tmp_path, secure, APP))
    assert described.returncode == 0, described.stderr
    assert [(p["topic"], p["current_offset"]) for p in json.loads(described.stdout)] == [
        (topic, 0)]
    refused = samsa("groups", "describe", group, *_as(tmp_path, secure, READER))
    assert refused.returncode == 1 and "group_authorization_failed" in refused.stderr, \
        refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
