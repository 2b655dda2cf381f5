"""Apache Kafka's Java client 4.3 against the secure broker (TLS, SASL, Kafka's authorizer),
through the existing drivers (Produce, Member, ConsumerProtocolMember, AdminDriver) with
security properties.

For each way in (SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; SSL with a PEM client
keystore; OAUTHBEARER with a signed token, read by the client's own login handler from a
file; OAUTHBEARER with the client's unsecured development token, on the listener that
explicitly accepts those): alice produces and consumes in her group; bob's producer gets
TopicAuthorizationException and his consumer GroupAuthorizationException while alice is
served. Half of the ways consume in a classic group (Member), half in a KIP-848 consumer
group (ConsumerProtocolMember). Wrong credentials, an unsigned token where signed ones are
wanted and a plaintext client on a TLS listener are refused. The Java Admin manages ACLs as
the super user.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.javakit import MEMBER_FAST, Driver, JavaKit
from tests.security.conftest import Secure
from tests.security.kit import APP, app_name, password

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
WAYS = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS", "OAUTHBEARER",
        "OAUTHBEARER-unsecured"]
#: the consumer each way uses: classic groups and KIP-848 consumer groups, no extra JVMs
CONSUMER = {"SCRAM-SHA-256": "Member", "SCRAM-SHA-512": "ConsumerProtocolMember",
            "PLAIN": "Member", "mTLS": "ConsumerProtocolMember",
            "OAUTHBEARER": "ConsumerProtocolMember", "OAUTHBEARER-unsecured": "Member"}


def java_props(secure: Secure, way: str, tmp: Path, user: str = "alice",
               wrong: bool = False, signed_listener: bool = False) -> list[str]:
    """The client properties of ``user`` (the first is ``bootstrap.servers``)."""
    trust = ["ssl.truststore.type=PEM", f"ssl.truststore.location={secure.ca}"]
    if way == "mTLS":
        cert = secure.stranger if wrong else secure.certs[user]
        return [f"bootstrap.servers={secure.address('SSL')}", "security.protocol=SSL", *trust,
                "ssl.keystore.type=PEM", f"ssl.keystore.location={cert.pem}"]
    if way == "OAUTHBEARER-unsecured":
        listener = "SASL_SSL" if signed_listener else "SASL_PLAINTEXT"
        return [f"bootstrap.servers={secure.address(listener)}",
                f"security.protocol={listener}", *trust, "sasl.mechanism=OAUTHBEARER",
                f'sasl.jaas.config={OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="{user}";']
    common = [f"bootstrap.servers={secure.address('SASL_SSL')}", "security.protocol=SASL_SSL",
              f"sasl.mechanism={way}", *trust]
    if way == "OAUTHBEARER":
        # the client's own login handler reads the token from a file (its file:// "token
        # endpoint") and checks it before sending; a forged one is signed by another key
        token = tmp / f"{user}{'-forged' if wrong else ''}.jwt"
        token.write_text(secure.token(user, key=_forger() if wrong else None))
        url = token.as_uri()
        return [*common, "sasl.login.callback.handler.class=org.apache.kafka.common.security."
                         "oauthbearer.OAuthBearerLoginCallbackHandler",
                f"sasl.oauthbearer.token.endpoint.url={url}",
                f"driver.system.org.apache.kafka.sasl.oauthbearer.allowed.urls={url}",
                f"sasl.jaas.config={OAUTH_LOGIN} required;"]
    pw = "not-the-password" if wrong else password(f"User:{user}")
    return [*common, f'sasl.jaas.config={JAAS[way]} required username="{user}" '
                     f'password="{pw}";']


_FORGER: list[object] = []


def _forger() -> object:
    from cryptography.hazmat.primitives.asymmetric import rsa

    if not _FORGER:
        _FORGER.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return _FORGER[0]


def _error(d: Driver) -> str:
    """The error event's text of a driver that fails."""
    return str(d.wait_for(lambda e: e.get("event") in ("error", "records"), 60,
                          "an error").get("error", "records instead of an error"))


@pytest.mark.parametrize("way", WAYS)
def test_java_client_serves_alice_and_refuses_bob(java: JavaKit, secure: Secure,
                                                  way: str, tmp_path: Path) -> None:
    alice, bob = java_props(secure, way, tmp_path), java_props(secure, way, tmp_path, "bob")
    bootstrap = alice[0].split("=", 1)[1]
    topic = app_name("java")
    sent = [e for e in java.run("Produce", bootstrap, "10", f"{topic}:none:1", *alice)
            if e["event"] == "sent"]
    assert len(sent) == 10
    fast = [f"{k}={v}" for k, v in MEMBER_FAST.items()]
    if CONSUMER[way] == "ConsumerProtocolMember":
        fast = [f for f in fast if not f.startswith(("session", "heartbeat"))]
    # bob's two clients and alice's consumer run side by side: one JVM start's wait for all
    bob_produce = java.start("Produce", bootstrap, "1", f"{topic}:none:1", *bob,
                             "enable.idempotence=false")  # else InitProducerId is refused
    bob_consume = java.start(CONSUMER[way], bootstrap, app_name("g"), topic,
                             "driver.records=false", *fast, *bob)
    member = java.start(CONSUMER[way], bootstrap, app_name("g"), topic, *fast, *alice)
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
    assert _error(bob_produce).startswith("TopicAuthorizationException")
    assert bob_produce.wait_exit(30) != 0
    assert _error(bob_consume).startswith("GroupAuthorizationException")
    bob_consume.kill()


@pytest.mark.parametrize("way", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS",
                                 "OAUTHBEARER"])
def test_java_client_wrong_credentials_are_refused(java: JavaKit, secure: Secure,
                                                   way: str, tmp_path: Path) -> None:
    props = java_props(secure, way, tmp_path, wrong=True)
    d = java.start("Produce", props[0].split("=", 1)[1], "1", "app-x:none:1", *props,
                   "max.block.ms=5000")
    assert d.wait_exit(60) != 0
    error = _error(d)
    if way == "mTLS":  # the broker ends the TLS handshake: no broker is reachable
        assert error.startswith("TimeoutException"), error
    else:
        assert "SaslAuthenticationException" in error, error
        if way != "OAUTHBEARER":  # the same answer for an unknown user and a wrong password
            assert ("Invalid username or password" if way == "PLAIN"
                    else "invalid credentials") in error, error


def test_java_unsigned_token_is_refused_where_signed_ones_are_wanted(
        java: JavaKit, secure: Secure, tmp_path: Path) -> None:
    props = java_props(secure, "OAUTHBEARER-unsecured", tmp_path, signed_listener=True)
    d = java.start("Produce", secure.address("SASL_SSL"), "1", "app-y:none:1", *props)
    assert d.wait_exit(60) != 0
    assert "SaslAuthenticationException" in _error(d)


def test_java_plaintext_client_on_a_tls_listener_is_refused(java: JavaKit,
                                                            secure: Secure) -> None:
    d = java.start("Produce", secure.address("SASL_SSL"), "1", "app-z:none:1",
                   "max.block.ms=3000")
    assert d.wait_exit(60) != 0
    assert _error(d).startswith("TimeoutException")


def test_java_admin_manages_acls(java: JavaKit, secure: Secure,
                                 tmp_path: Path) -> None:
    """As the super user (SCRAM-SHA-512): create, describe and delete ACLs."""
    props = java_props(secure, "SCRAM-SHA-512", tmp_path, "admin")
    admin = java.start("AdminDriver", secure.address("SASL_SSL"), *props)
    try:
        topic = app_name("java-acl")
        acl = f"topic,prefixed,{topic},User:carol,10.0.0.0/8,read,allow"
        bad = "cluster,literal,my-cluster,User:carol,*,alter,allow"
        created = admin.request(f"create-acls {acl} {bad}")
        assert created["ok"], created
        assert created["errors"][acl] is None
        assert created["errors"][bad].startswith("InvalidRequestException"), created
        match = f"topic,match,{topic}-orders,User:carol,null,any,any"
        listed = admin.request(f"describe-acls {match}")
        assert listed["acls"] == [
            f"TOPIC,PREFIXED,{topic},User:carol,10.0.0.0/8,READ,ALLOW"], listed
        deleted = admin.request(f"delete-acls topic,any,{topic},User:carol,null,any,any")
        assert deleted["results"][f"topic,any,{topic},User:carol,null,any,any"] == {
            "deleted": [f"TOPIC,PREFIXED,{topic},User:carol,10.0.0.0/8,READ,ALLOW"]}
        assert admin.request(f"describe-acls {match}")["acls"] == []
        everything = admin.request("describe-acls")["acls"]
        assert f"GROUP,PREFIXED,app-,{APP},*,READ,ALLOW" in everything  # made offline
    finally:
        admin.kill()
