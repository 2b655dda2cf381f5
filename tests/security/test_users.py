"""SCRAM users: offline with ``samsa users`` (as ``kafka-storage format --add-scram``), and
online with AlterUserScramCredentials / DescribeUserScramCredentials from confluent-kafka's
admin client; PLAIN logins are checked against the same salted credentials."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.security.conftest import Secure
from tests.security.kit import samsa
from tests.security.test_clients import rdkafka

pytestmark = pytest.mark.conformance


def test_users_cli_offline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    secret = tmp_path / "pw"
    secret.write_text("from-a-file\n")
    assert samsa("users", "add", "--data-dir", str(data), "--user", "alice",
                 "--password-file", str(secret)).returncode == 0
    assert samsa("users", "add", "--data-dir", str(data), "--user", "alice", "--mechanism",
                 "SCRAM-SHA-512", "--password", "pw", "--iterations", "8192").returncode == 0
    listed = json.loads(samsa("users", "list", "--data-dir", str(data), "-o", "json").stdout)
    assert listed == {"alice": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                                {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
    stored = (data / "security" / "scram-credentials.json").read_text()
    assert "from-a-file" not in stored and '"pw"' not in stored
    assert (data / "security" / "scram-credentials.json").stat().st_mode & 0o077 == 0
    bad = samsa("users", "add", "--data-dir", str(data), "--user", "x", "--password", "p",
                "--iterations", "10")
    assert bad.returncode == 2 and "iterations must be between 4096 and 16384" in bad.stderr
    gone = samsa("users", "delete", "--data-dir", str(data), "--user", "bob")
    assert gone.returncode == 1 and "no SCRAM credential for bob" in gone.stderr
    assert samsa("users", "delete", "--data-dir", str(data), "--user", "alice",
                 "--mechanism", "SCRAM-SHA-256").returncode == 0
    assert "SCRAM-SHA-256" not in samsa("users", "list", "--data-dir", str(data)).stdout


def _admin(secure: Secure) -> AdminClient:
    """The super user's: managing users needs ALTER on the cluster (listing them DESCRIBE)."""
    return AdminClient(rdkafka(secure, "SCRAM-SHA-256", "admin"))


def _authenticates(conf: dict[str, Any]) -> None:
    """The credentials get a client in (a new user may do nothing more: no ACL names it)."""
    assert AdminClient({**conf, "log_level": 0}).list_topics(timeout=10).brokers


def test_alter_and_describe_user_scram_credentials(secure: Secure) -> None:
    admin = _admin(secure)
    user = f"u{uuid.uuid4().hex[:6]}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    done = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, info, b"new-secret", b"salt-of-sixteen!")])
    done[user].result(10)
    described = admin.describe_user_scram_credentials([user])[user].result(10)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = admin.describe_user_scram_credentials().result(10)
    assert {"alice", user} <= set(everyone)
    conf = {**rdkafka(secure, "SCRAM-SHA-512"), "sasl.username": user,
            "sasl.password": "new-secret"}
    _authenticates(conf)
    plain = {**rdkafka(secure, "PLAIN"), "sasl.username": user, "sasl.password": "new-secret"}
    _authenticates(plain)  # PLAIN against the SCRAM store
    as_alice = AdminClient(rdkafka(secure, "SCRAM-SHA-256"))  # kept: the future needs it
    refused = as_alice.alter_user_scram_credentials([
        UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(KafkaException) as exc:  # alice may not ALTER the cluster
        refused[user].result(10)
    assert exc.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"

    errors = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("weak", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                 100), b"pw"),
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)])
    for name, code in (("weak", "UNACCEPTABLE_CREDENTIAL"), ("nobody", "RESOURCE_NOT_FOUND")):
        with pytest.raises(KafkaException) as exc:
            errors[name].result(10)
        assert exc.value.args[0].name() == code
    with pytest.raises(KafkaException) as exc:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    assert exc.value.args[0].name() == "RESOURCE_NOT_FOUND"

    admin.alter_user_scram_credentials([
        UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])[user].result(10)
    with pytest.raises(KafkaException):
        AdminClient({**conf, "log_level": 0}).list_topics(timeout=2.5)
    del exc, admin, as_alice  # the clients go now, not when a cycle is collected


def test_users_added_beside_a_running_broker_apply_within_a_second(secure: Secure) -> None:
    user = f"v{uuid.uuid4().hex[:6]}"
    assert samsa("users", "add", "--data-dir", str(secure.broker.data_dir), "--user", user,
                 "--password", "beside").returncode == 0
    time.sleep(1.5)
    conf = {**rdkafka(secure, "SCRAM-SHA-256"), "sasl.username": user, "sasl.password": "beside"}
    _authenticates(conf)
