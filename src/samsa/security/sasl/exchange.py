"""One connection's SASL exchange on a SASL listener, as Kafka's ``SaslServerAuthenticator``.

Pure: requests (already decoded) and ``now`` in, a :class:`Reply` out; the broker's
connection sends the answer and closes when told. The states::

    INITIAL --ApiVersions--> HANDSHAKE --SaslHandshake--> AUTHENTICATE --...--> COMPLETE
       \\----------------------SaslHandshake--------------/          (tokens)      |
                                      AUTHENTICATE <--SaslHandshake (re-authentication)

* Before authentication only ApiVersions (once, first) and SaslHandshake are served; any
  other request closes the connection, as Kafka does.
* SaslHandshake v0 (KIP-43): the tokens then travel as bare size-prefixed frames
  (:meth:`SaslExchange.on_raw`); v1: inside SaslAuthenticate requests (v0-v2).
* A mechanism the listener does not enable: UNSUPPORTED_SASL_MECHANISM with the enabled
  list, then the connection closes. Refused credentials: SASL_AUTHENTICATION_FAILED with
  the mechanism's message, then the connection closes (:attr:`Reply.failed`: the broker
  delays that answer by ``connection.failed.authentication.delay.ms``, KIP-306).
* KIP-368: a session lasts ``connections.max.reauth.ms`` or until the credential expires
  (a token's ``exp``), whichever is first; SaslAuthenticate v1+ tells the client
  (``session_lifetime_ms``). The client re-authenticates on the same connection with the
  same mechanism and principal; once the session has expired, any other request closes it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import response_class
from samsa.security.principal import KafkaPrincipal
from samsa.security.sasl.mechanism import (
    AuthenticationFailed,
    MechanismFactory,
    ServerMechanism,
)


class State(enum.Enum):
    INITIAL = "initial"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Reply:
    """What the connection does with one request (or bare token)."""

    #: a response entity of the request's version to send
    response: Any = None
    #: a bare token to send in a size-prefixed frame (after a v0 handshake)
    raw: bytes | None = None
    #: let the broker's handler answer the request
    dispatch: bool = False
    #: close the connection (after sending the answer, if any)
    close: bool = False
    #: an authentication failure (its answer is delayed, KIP-306)
    failed: bool = False
    #: why, for the broker's log (never a credential)
    reason: str = ""


_DISPATCH = Reply(dispatch=True)


def _title(api_key: int) -> str:
    try:
        return ApiKey(api_key).title
    except ValueError:
        return f"api key {api_key}"


class SaslExchange:
    """The SASL state of one connection (see the module docstring)."""

    def __init__(self, mechanisms: Mapping[str, MechanismFactory], max_reauth_ms: int = 0) -> None:
        self.mechanisms = mechanisms
        self.max_reauth_ms = max_reauth_ms
        self.state = State.INITIAL
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        #: when the session ends (ms), None for never
        self.expires_at_ms: int | None = None
        #: tokens come as bare frames (a v0 handshake) while authenticating
        self.raw = False
        self._server: ServerMechanism | None = None
        self._reauth_from: tuple[str, KafkaPrincipal] | None = None
        self._bad_mechanism: str | None = None

    @property
    def authenticated(self) -> bool:
        """True while requests other than SASL's are served (also during re-authentication,
        which needs SaslAuthenticate requests only)."""
        return self.state is State.COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        return self.state is State.AUTHENTICATE and self.raw

    def on_request(self, api_key: int, version: int, body: Any, now_ms: int) -> Reply:
        state = self.state
        if state is State.COMPLETE:
            if api_key == ApiKey.SASL_HANDSHAKE:
                assert self.mechanism is not None and self.principal is not None
                self._reauth_from = (self.mechanism, self.principal)
                return self._handshake(version, body)
            if self.expires_at_ms is not None and now_ms >= self.expires_at_ms:
                return self._close(f"the SASL session of {self.principal} expired")
            return _DISPATCH
        if state is State.INITIAL and api_key == ApiKey.API_VERSIONS:
            self.state = State.HANDSHAKE
            return _DISPATCH
        if state in (State.INITIAL, State.HANDSHAKE) and api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(version, body)
        if state is State.AUTHENTICATE and not self.raw and api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(version, body.auth_bytes, now_ms)
        return self._close(f"unexpected request {_title(api_key)} during SASL {state.value}")

    def on_raw(self, token: bytes, now_ms: int) -> Reply:
        """A bare token after a v0 handshake (a Kafka-framed request is not expected)."""
        try:
            challenge = self._step(token, now_ms)
        except AuthenticationFailed as exc:
            self.state = State.FAILED
            return Reply(close=True, failed=True, reason=str(exc))
        return Reply(raw=challenge)

    # -- steps ------------------------------------------------------------------------------
    def _close(self, reason: str) -> Reply:
        self.state = State.FAILED
        return Reply(close=True, reason=reason)

    def _handshake(self, version: int, body: Any) -> Reply:
        mechanism = str(body.mechanism)
        enabled = list(self.mechanisms)
        if mechanism not in self.mechanisms:
            self.state = State.FAILED
            answer = build(response_class(ApiKey.SASL_HANDSHAKE, version),
                           {"error_code": ErrorCode.unsupported_sasl_mechanism,
                            "mechanisms": enabled})
            return Reply(response=answer, close=True,
                         reason=f"unsupported SASL mechanism {mechanism!r}")
        self.raw = version == 0
        self._bad_mechanism = None
        if self._reauth_from is not None and self._reauth_from[0] != mechanism:
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                   "supported for re-authentication of mechanism "
                                   f"'{self._reauth_from[0]}'")
        else:
            self.mechanism = mechanism
            self._server = self.mechanisms[mechanism]()
        self.state = State.AUTHENTICATE
        return Reply(response=build(response_class(ApiKey.SASL_HANDSHAKE, version),
                                    {"error_code": ErrorCode.none, "mechanisms": enabled}))

    def _step(self, token: bytes, now_ms: int) -> bytes:
        if self._bad_mechanism is not None:
            raise AuthenticationFailed(self._bad_mechanism)
        server = self._server
        assert server is not None
        challenge = server.step(bytes(token), now_ms)
        if server.complete:
            assert server.principal is not None
            if self._reauth_from is not None and self._reauth_from[1] != server.principal:
                previous = self._reauth_from[1]
                raise AuthenticationFailed(
                    "Cannot change principals during re-authentication from "
                    f"{previous.principal_type}.{previous.name}: "
                    f"{server.principal.principal_type}.{server.principal.name}")
            self.principal = server.principal
            self.state = State.COMPLETE
            self._reauth_from = None
            self._server = None
            self.expires_at_ms = self._session_end(server.expires_at_ms, now_ms)
        return challenge

    def _session_end(self, credential_end: int | None, now_ms: int) -> int | None:
        """Kafka's session lifetime: the sooner of the credential's end and
        ``connections.max.reauth.ms`` (neither: no end)."""
        ends = [credential_end] if credential_end is not None else []
        if self.max_reauth_ms > 0:
            ends.append(now_ms + self.max_reauth_ms)
        return max(now_ms, min(ends)) if ends else None

    def _authenticate(self, version: int, token: bytes, now_ms: int) -> Reply:
        cls = response_class(ApiKey.SASL_AUTHENTICATE, version)
        try:
            challenge = self._step(token, now_ms)
        except AuthenticationFailed as exc:
            self.state = State.FAILED
            answer = build(cls, {"error_code": ErrorCode.sasl_authentication_failed,
                                 "error_message": str(exc), "auth_bytes": b""})
            return Reply(response=answer, close=True, failed=True, reason=str(exc))
        lifetime = 0
        if self.state is State.COMPLETE and self.expires_at_ms is not None:
            lifetime = self.expires_at_ms - now_ms
        return Reply(response=build(cls, {"error_code": ErrorCode.none, "error_message": None,
                                          "auth_bytes": challenge,
                                          "session_lifetime": lifetime}))
