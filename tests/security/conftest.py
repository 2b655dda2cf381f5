"""Fixtures of the security tests: one secure broker for the session, serving both the
authentication and the authorization tests.

The ``secure`` broker listens on SASL_SSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with signed
tokens), SSL with client certificates required (``CN=alice,OU=eng,O=samsa`` maps to
``User:alice``), SASL_PLAINTEXT (where OAUTHBEARER takes unsigned development tokens) and
PLAINTEXT (``User:ANONYMOUS``, allowed nothing). It runs Kafka's authorizer; its users and
first ACLs are made offline before it starts, as an operator would (see
:mod:`tests.security.kit` for who may do what). Certificates and the OAuth issuer's key are
made fresh for the session.

``admin`` and ``subject`` are raw connections (:class:`tests.wire.WireClient`) of the super
user and of the authorization matrix's subject, both SCRAM over SASL_SSL.
"""

from __future__ import annotations

import json
import ssl
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
from tests.security.certs import Issued, Pki
from tests.security.kit import (
    ADMIN,
    ADMIN_HOST,
    APP,
    READER,
    SECURED,
    SUBJECT,
    SUBJECT_HOST,
    name_of,
    password,
    prepare,
    run_cli,
)
from tests.wire import WireClient

PASSWORD = password(APP)
"""alice's password."""
ISSUER = "https://issuer.samsa.test"


@dataclass
class Secure:
    """The secure broker and what clients need to reach it."""

    broker: BrokerProcess
    config: dict[str, str]
    """Its settings (another broker with them and a :func:`prepare`d data directory is
    secured alike)."""
    ca: Path
    certs: dict[str, Issued]
    """Client certificates by user name (``User:<name>`` through the mapping rule)."""
    stranger: Issued  # a certificate of another CA
    oauth_key: Any
    root: Path

    @property
    def alice(self) -> Issued:
        return self.certs["alice"]

    @property
    def log(self) -> Path:
        return self.broker.log_path

    def address(self, listener: str) -> str:
        return self.broker.address(listener)

    def token(self, sub: str = "alice", ttl_s: int = 600, key: Any = None) -> str:
        now = int(time.time())
        return jwt.encode({"sub": sub, "iss": ISSUER, "iat": now, "exp": now + ttl_s},
                          key or self.oauth_key, algorithm="RS256", headers={"kid": "k1"})

    def tls(self, user: str | None = None) -> ssl.SSLContext:
        """A client's TLS context (with ``user``'s certificate for mTLS)."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if user is not None:
            ctx.load_cert_chain(self.certs[user].crt, self.certs[user].key)
        return ctx

    def properties(self, directory: Path, user: str, way: str = "SCRAM-SHA-512",
                   secret: str | None = None) -> Path:
        """A client properties file (``--command-config``, as Kafka's tools take it) of
        ``user``: SASL ``way`` over SASL_SSL with ``secret`` (default: the user's password),
        or the user's client certificate (``way="mTLS"``)."""
        path = directory / f"{user}-{way}.properties"
        trust = f"ssl.truststore.type=PEM\nssl.truststore.location={self.ca}\n"
        if way == "mTLS":
            path.write_text(f"security.protocol=SSL\n{trust}ssl.keystore.type=PEM\n"
                            f"ssl.keystore.location={self.certs[user].pem}\n")
            return path
        module = "plain.PlainLoginModule" if way == "PLAIN" else "scram.ScramLoginModule"
        path.write_text(
            f"security.protocol=SASL_SSL\nsasl.mechanism={way}\n"
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{secret or password(f"User:{user}")}";\n{trust}')
        return path

    def connect(self, principal: str, mechanism: str = "SCRAM-SHA-512",
                source: str | None = None, broker: BrokerProcess | None = None) -> WireClient:
        """A raw connection of ``principal`` (to ``broker``, by default the session's):
        SASL ``mechanism`` over SASL_SSL, or its client certificate on the SSL listener
        (``mechanism="mTLS"``)."""
        user, to = name_of(principal), broker or self.broker
        if mechanism == "mTLS":
            return WireClient(to.address("SSL"), source=source, tls=self.tls(user))
        return WireClient(to.address("SASL_SSL"), source=source, tls=self.tls(),
                          sasl=(mechanism, user, password(principal)))


def users_add(data_dir: Path, user: str, mechanism: str, password: str) -> None:
    run_cli("users", "add", "--data-dir", str(data_dir), "--mechanism", mechanism, "--user", user,
         "--password", password)


def secure_config(pki_dir: Path, broker_cert: Issued, jwks: Path) -> dict[str, str]:
    return {
        **SECURED,
        "super.users": ADMIN,
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
    certs = {name_of(p): pki.issue(name_of(p), ou="eng") for p in (APP, READER, SUBJECT)}
    stranger = Pki(root / "other-pki", name="other-ca").issue("alice", ou="eng")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = root / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}))
    data = root / "data"
    prepare(data)
    config = secure_config(root / "pki", broker_cert, jwks)
    proc = BrokerProcess(data, config).start()
    yield Secure(proc, config, pki.ca, certs, stranger, key, root)
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="module")
def admin(secure: Secure) -> Iterator[WireClient]:
    """The super user (SCRAM-SHA-512), from ADMIN_HOST."""
    c = secure.connect(ADMIN, source=ADMIN_HOST)
    yield c
    c.close()


@pytest.fixture(scope="module")
def subject(secure: Secure) -> Iterator[WireClient]:
    """The matrix's subject (SCRAM-SHA-256), from SUBJECT_HOST."""
    c = secure.connect(SUBJECT, "SCRAM-SHA-256", source=SUBJECT_HOST)
    yield c
    c.close()
