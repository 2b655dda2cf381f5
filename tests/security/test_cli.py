"""The CLI's ``--command-config``: Kafka client properties for TLS and SASL, as Kafka's tools."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.security.conftest import PASSWORD, Secure
from tests.security.test_users import samsa

pytestmark = pytest.mark.conformance


def _properties(tmp: Path, secure: Secure, password: str) -> Path:
    path = tmp / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={secure.ca}\n")
    return path


def test_command_config_authenticates_the_cli(secure: Secure, tmp_path: Path) -> None:
    props = _properties(tmp_path, secure, PASSWORD)
    topic = f"cli-{uuid.uuid4().hex[:6]}"
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
