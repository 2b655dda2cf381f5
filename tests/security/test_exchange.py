"""The SASL exchange of one connection (pure: requests and ``now`` in, replies out), with
the real PLAIN, SCRAM and OAUTHBEARER server mechanisms and samsa's client mechanisms."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.security.credentials import CredentialStore, from_password
from samsa.security.principal import KafkaPrincipal
from samsa.security.sasl import client
from samsa.security.sasl.exchange import SaslExchange, State
from samsa.security.sasl.oauthbearer import OAuthBearerServer, UnsecuredValidator
from samsa.security.sasl.plain import PlainServer
from samsa.security.sasl.scram import ScramServer

STORE = CredentialStore({"alice": {"SCRAM-SHA-256": from_password("SCRAM-SHA-256", "pw-a"),
                                   "SCRAM-SHA-512": from_password("SCRAM-SHA-512", "pw-a")},
                         "bob": {"SCRAM-SHA-256": from_password("SCRAM-SHA-256", "pw-b")}})
MECHANISMS = {
    "PLAIN": partial(PlainServer, STORE.verify_plain),
    "SCRAM-SHA-256": partial(ScramServer, "SCRAM-SHA-256", STORE),
    "SCRAM-SHA-512": partial(ScramServer, "SCRAM-SHA-512", STORE),
    "OAUTHBEARER": partial(OAuthBearerServer, UnsecuredValidator()),
}
ALICE = KafkaPrincipal("User", "alice")


def handshake(ex: SaslExchange, mechanism: str, version: int = 1, now: int = 0) -> object:
    return ex.on_request(ApiKey.SASL_HANDSHAKE, version,
                         SimpleNamespace(mechanism=mechanism), now)


def authenticate(ex: SaslExchange, mech: client.ClientMechanism, now: int = 0,
                 version: int = 2) -> object:
    """Run a client mechanism to the end; the last reply."""
    token: bytes | None = mech.first()
    while True:
        assert token is not None
        reply = ex.on_request(ApiKey.SASL_AUTHENTICATE, version,
                              SimpleNamespace(auth_bytes=token), now)
        if reply.close or reply.response.error_code != ErrorCode.none:  # type: ignore[attr-defined]
            return reply
        token = mech.respond(reply.response.auth_bytes)  # type: ignore[attr-defined]
        if token is None:
            return reply


@pytest.mark.parametrize("name", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms_authenticate(name: str) -> None:
    ex = SaslExchange(MECHANISMS)
    assert ex.on_request(ApiKey.API_VERSIONS, 3, None, 0).dispatch
    answer = handshake(ex, name).response  # type: ignore[attr-defined]
    assert answer.error_code == ErrorCode.none and name in answer.mechanisms
    reply = authenticate(ex, client.mechanism(name, username="alice", password="pw-a"))
    assert not reply.close and ex.authenticated and ex.principal == ALICE  # type: ignore[attr-defined]
    assert ex.on_request(ApiKey.METADATA, 12, None, 0).dispatch


@pytest.mark.parametrize("name", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["alice", "nobody"])
def test_a_wrong_password_fails_and_closes(name: str, user: str) -> None:
    ex = SaslExchange(MECHANISMS)
    handshake(ex, name)
    reply = authenticate(ex, client.mechanism(name, username=user, password="wrong"))
    assert reply.close and reply.failed  # type: ignore[attr-defined]
    assert reply.response.error_code == ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
    assert "wrong" not in reply.response.error_message  # type: ignore[attr-defined]
    assert not ex.authenticated and ex.state is State.FAILED


def test_scram_failures_do_not_tell_which_users_exist() -> None:
    messages = set()
    for user in ("alice", "nobody"):
        ex = SaslExchange(MECHANISMS)
        handshake(ex, "SCRAM-SHA-256")
        reply = authenticate(ex, client.mechanism("SCRAM-SHA-256", username=user, password="x"))
        messages.add(reply.response.error_message)  # type: ignore[attr-defined]
    assert messages == {"Authentication failed during authentication due to invalid "
                        "credentials with SASL mechanism SCRAM-SHA-256"}


def test_an_unknown_mechanism_lists_the_enabled_ones_and_closes() -> None:
    ex = SaslExchange({"PLAIN": MECHANISMS["PLAIN"]})
    reply = handshake(ex, "GSSAPI")
    assert reply.close  # type: ignore[attr-defined]
    assert reply.response.error_code == ErrorCode.unsupported_sasl_mechanism  # type: ignore[attr-defined]
    assert list(reply.response.mechanisms) == ["PLAIN"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("key", [ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.SASL_AUTHENTICATE])
def test_requests_before_authentication_close(key: ApiKey) -> None:
    ex = SaslExchange(MECHANISMS)
    reply = ex.on_request(key, 0, SimpleNamespace(auth_bytes=b""), 0)
    assert reply.close and reply.response is None and not ex.authenticated


def test_api_versions_only_first() -> None:
    ex = SaslExchange(MECHANISMS)
    assert ex.on_request(ApiKey.API_VERSIONS, 3, None, 0).dispatch
    assert ex.on_request(ApiKey.API_VERSIONS, 3, None, 0).close


def test_handshake_v0_takes_bare_tokens() -> None:
    ex = SaslExchange(MECHANISMS)
    handshake(ex, "PLAIN", version=0)
    assert ex.expects_raw_token
    reply = ex.on_raw(b"\0alice\0pw-a", 0)
    assert reply.raw == b"" and not reply.close and ex.principal == ALICE
    ex2 = SaslExchange(MECHANISMS)
    handshake(ex2, "PLAIN", version=0)
    assert ex2.on_raw(b"\0alice\0bad", 0).close


def test_session_lifetime_and_reauthentication() -> None:
    """KIP-368: the session ends after connections.max.reauth.ms; the client re-authenticates
    on the connection with the same mechanism and principal; past the end, a request closes."""
    ex = SaslExchange(MECHANISMS, max_reauth_ms=1000)
    handshake(ex, "SCRAM-SHA-256", now=0)
    reply = authenticate(ex, client.mechanism("SCRAM-SHA-256", username="alice",
                                              password="pw-a"), now=100)
    assert reply.response.session_lifetime.total_seconds() == 1.0  # type: ignore[attr-defined]
    assert ex.expires_at_ms == 1100
    assert ex.on_request(ApiKey.FETCH, 12, None, 1099).dispatch
    handshake(ex, "SCRAM-SHA-256", now=1050)
    authenticate(ex, client.mechanism("SCRAM-SHA-256", username="alice", password="pw-a"),
                 now=1060)
    assert ex.authenticated and ex.expires_at_ms == 2060
    assert ex.on_request(ApiKey.FETCH, 12, None, 2059).dispatch
    assert ex.on_request(ApiKey.FETCH, 12, None, 2060).close


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    ex = SaslExchange(MECHANISMS)
    handshake(ex, "SCRAM-SHA-256")
    authenticate(ex, client.mechanism("SCRAM-SHA-256", username="alice", password="pw-a"))
    handshake(ex, "SCRAM-SHA-256")
    reply = authenticate(ex, client.mechanism("SCRAM-SHA-256", username="bob", password="pw-b"))
    assert reply.close and "Cannot change principals" in reply.response.error_message  # type: ignore[attr-defined]

    ex = SaslExchange(MECHANISMS)
    handshake(ex, "SCRAM-SHA-256")
    authenticate(ex, client.mechanism("SCRAM-SHA-256", username="alice", password="pw-a"))
    assert handshake(ex, "PLAIN").response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    reply = authenticate(ex, client.mechanism("PLAIN", username="alice", password="pw-a"))
    assert reply.close and "re-authentication" in reply.response.error_message  # type: ignore[attr-defined]


def _unsecured(sub: str, exp_s: int) -> str:
    import base64
    import json

    def b64(d: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'exp': exp_s})}."


def test_oauthbearer_token_lifetime_bounds_the_session() -> None:
    ex = SaslExchange(MECHANISMS, max_reauth_ms=3_600_000)
    handshake(ex, "OAUTHBEARER", now=1_000_000)
    reply = authenticate(ex, client.mechanism(
        "OAUTHBEARER", token_provider=lambda: _unsecured("carol", 1_060)), now=1_000_000)
    assert ex.principal == KafkaPrincipal("User", "carol")
    assert reply.response.session_lifetime.total_seconds() == 60  # type: ignore[attr-defined]


def test_oauthbearer_refused_token_is_answered_as_rfc7628() -> None:
    ex = SaslExchange(MECHANISMS)
    handshake(ex, "OAUTHBEARER")
    first = ex.on_request(ApiKey.SASL_AUTHENTICATE, 2, SimpleNamespace(
        auth_bytes=b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"), 0)
    assert first.response.auth_bytes == b'{"status": "invalid_token"}'  # type: ignore[attr-defined]
    last = ex.on_request(ApiKey.SASL_AUTHENTICATE, 2, SimpleNamespace(auth_bytes=b"\x01"), 0)
    assert last.close and last.response.error_code == ErrorCode.sasl_authentication_failed


KEYS = [ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.METADATA]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 2),
                          st.sampled_from([*MECHANISMS, "GSSAPI", ""]), st.binary(max_size=64)),
                max_size=8))
def test_any_request_sequence_is_answered_or_closes(
        steps: list[tuple[ApiKey, int, str, bytes]]) -> None:
    """Garbage in any order never raises; once closed the exchange stays closed and never
    authenticates (random tokens are not credentials)."""
    ex = SaslExchange(MECHANISMS)
    closed = False
    for key, version, mechanism, token in steps:
        if ex.expects_raw_token:
            reply = ex.on_raw(token, 0)
        else:
            reply = ex.on_request(key, version if key != ApiKey.SASL_HANDSHAKE else version % 2,
                                  SimpleNamespace(mechanism=mechanism, auth_bytes=token), 0)
        assert not closed or reply.close
        closed = closed or reply.close
    assert not ex.authenticated or ex.principal is not None
    assert ex.principal is None
