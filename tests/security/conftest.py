"""Fixtures of the security tests.

Authentication: fresh certificates, an OAuth issuer key, and a broker with every kind of
listener.

The ``secure`` broker listens on SASL_SSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), SSL with
client certificates required (``CN=alice,OU=eng,O=samsa`` maps to ``User:alice``),
SASL_PLAINTEXT (where OAUTHBEARER takes unsigned development tokens) and PLAINTEXT. Its
SCRAM users are made offline with ``samsa users add`` before it starts, as an operator
would: ``alice`` (both SCRAM mechanisms).

Authorization: one secured broker per module, and the administrator's and the subject's
connections to it (see :mod:`tests.security.kit`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from samsa.security.sasl.oauthbearer import UNSECURED_HANDLER
from tests.brokerproc import BrokerProcess
from tests.conftest import FAST_GROUPS
from tests.security.certs import Issued, Pki
from tests.security.kit import ADMIN_HOST, SUBJECT_HOST, secured_broker
from tests.wire import WireClient

PASSWORD = "alice-secret"
ISSUER = "https://issuer.samsa.test"


@dataclass
class Secure:
    """The secure broker and what clients need to reach it."""

    broker: BrokerProcess
    ca: Path
    alice: Issued  # a client certificate (User:alice through the mapping rule)
    stranger: Issued  # a certificate of another CA
    oauth_key: Any
    log: Path

    def address(self, listener: str) -> str:
        return self.broker.address(listener)

    def token(self, sub: str = "alice", ttl_s: int = 600, key: Any = None) -> str:
        now = int(time.time())
        return jwt.encode({"sub": sub, "iss": ISSUER, "iat": now, "exp": now + ttl_s},
                          key or self.oauth_key, algorithm="RS256", headers={"kid": "k1"})


def users_add(data_dir: Path, user: str, mechanism: str, password: str) -> None:
    done = subprocess.run([sys.executable, "-m", "samsa.cli.main", "users", "add", "--data-dir",
                           str(data_dir), "--mechanism", mechanism, "--user", user, "--password",
                           password], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def secure_config(pki_dir: Path, broker_cert: Issued, jwks: Path) -> dict[str, str]:
    return {
        **FAST_GROUPS,
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.location": str(broker_cert.pem),
        "ssl.key.password": "broker-key-pw",
        "ssl.truststore.location": str(pki_dir / "samsa-test-ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=samsa$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.issuer": ISSUER,
        # unsigned tokens, explicitly enabled on the SASL_PLAINTEXT listener only
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            UNSECURED_HANDLER,
        "connection.failed.authentication.delay.ms": "20",
    }


@pytest.fixture(scope="session")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    root = tmp_path_factory.mktemp("secure")
    pki = Pki(root / "pki")
    broker_cert = pki.issue("broker", server=True, password="broker-key-pw")
    alice = pki.issue("alice", ou="eng")
    stranger = Pki(root / "other-pki", name="other-ca").issue("alice", ou="eng")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = root / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}))
    data = root / "data"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        users_add(data, "alice", mechanism, PASSWORD)
    proc = BrokerProcess(data, secure_config(root / "pki", broker_cert, jwks)).start()
    yield Secure(proc, pki.ca, alice, stranger, key, proc.log_path)
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = secured_broker(tmp_path_factory.mktemp("authz") / "data").start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="module")
def admin(secured: BrokerProcess) -> Iterator[WireClient]:
    c = WireClient(secured.bootstrap, source=ADMIN_HOST)
    yield c
    c.close()


@pytest.fixture(scope="module")
def subject(secured: BrokerProcess) -> Iterator[WireClient]:
    c = WireClient(secured.bootstrap, source=SUBJECT_HOST)
    yield c
    c.close()
