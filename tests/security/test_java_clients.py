"""Apache Kafka's Java client 4.3 against TLS and SASL listeners, through the existing
drivers (Produce, Member) with security properties: SASL_SSL with SCRAM-SHA-256,
SCRAM-SHA-512 and PLAIN, SSL with a PEM client keystore, and OAUTHBEARER with the client's
unsecured development tokens on the listener that explicitly accepts them (its signed-token
login handler needs jose4j, which no registry reachable here ships; signed tokens are
covered with librdkafka and samsa's client). A wrong password, and an unsigned token on the
listener that wants signed ones, are refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.conformance.conftest import java  # noqa: F401 - the fixture
from tests.conformance.javakit import MEMBER_FAST, JavaKit
from tests.security.conftest import PASSWORD, Secure

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_props(secure: Secure, way: str, tmp: Path, password: str = PASSWORD,
               signed_listener: bool = False) -> list[str]:
    trust = ["ssl.truststore.type=PEM", f"ssl.truststore.location={secure.ca}"]
    if way == "mTLS":
        return [f"bootstrap.servers={secure.address('SSL')}", "security.protocol=SSL", *trust,
                "ssl.keystore.type=PEM", f"ssl.keystore.location={secure.alice.pem}"]
    common = [f"bootstrap.servers={secure.address('SASL_SSL')}", "security.protocol=SASL_SSL",
              f"sasl.mechanism={way}", *trust]
    if way == "OAUTHBEARER-unsecured":
        listener = "SASL_PLAINTEXT" if not signed_listener else "SASL_SSL"
        protocol = [f"bootstrap.servers={secure.address(listener)}",
                    f"security.protocol={listener}", *trust]
        return [*protocol, "sasl.mechanism=OAUTHBEARER",
                "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
                'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";']
    return [*common, f'sasl.jaas.config={JAAS[way]} required username="alice" '
                     f'password="{password}";']


@pytest.mark.parametrize("way", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS",
                                 "OAUTHBEARER-unsecured"])
def test_java_client_produces_and_consumes_in_a_group(java: JavaKit, secure: Secure,  # noqa: F811
                                                      way: str, tmp_path: Path) -> None:
    props = java_props(secure, way, tmp_path)
    bootstrap = props[0].split("=", 1)[1]
    topic = f"java-{uuid.uuid4().hex[:8]}"
    sent = [e for e in java.run("Produce", bootstrap, "10", f"{topic}:none:1", *props)
            if e["event"] == "sent"]
    assert len(sent) == 10
    member = java.start("Member", bootstrap, f"g-{uuid.uuid4().hex[:6]}", topic,
                        *(f"{k}={v}" for k, v in MEMBER_FAST.items()), *props)
    got: list[str] = []

    def all_read(e: dict[str, object]) -> bool:
        if e.get("event") == "records":
            got.extend(str(r["value"]) for r in e["records"])  # type: ignore[union-attr]
        return len(got) >= 10

    member.wait_for(all_read, 60, "10 records")
    assert member.request("commit")["ok"]
    assert sorted(got) == sorted(str(e["value"]) for e in sent)
    member.send("close")
    member.wait_for(lambda e: e["event"] == "closed", 30, "closed")


def test_java_client_wrong_password_is_refused(java: JavaKit, secure: Secure,  # noqa: F811
                                               tmp_path: Path) -> None:
    props = java_props(secure, "SCRAM-SHA-512", tmp_path, password="wrong")
    d = java.start("Produce", secure.address("SASL_SSL"), "1", "java-x:none:1", *props)
    assert d.wait_exit(60) != 0
    error = d.of("error")[-1]["error"]
    assert "SaslAuthenticationException" in error and "invalid credentials" in error


def test_java_unsigned_token_is_refused_where_signed_ones_are_wanted(
        java: JavaKit, secure: Secure, tmp_path: Path) -> None:  # noqa: F811
    props = java_props(secure, "OAUTHBEARER-unsecured", tmp_path, signed_listener=True)
    d = java.start("Produce", secure.address("SASL_SSL"), "1", "java-y:none:1", *props)
    assert d.wait_exit(60) != 0
    assert "SaslAuthenticationException" in d.of("error")[-1]["error"]
