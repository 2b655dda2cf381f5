"""SASL/PLAIN (RFC 4616), checked by a password verifier (the SCRAM store, JAAS users)."""

from __future__ import annotations

from collections.abc import Callable

from samsa.security.principal import USER_TYPE, KafkaPrincipal
from samsa.security.sasl.mechanism import AuthenticationFailed

NAME = "PLAIN"

Verifier = Callable[[str, str], bool]
"""(user, password) -> whether the password is the user's."""


class PlainServer:
    """One PLAIN authentication: a single ``authzid NUL user NUL password`` token."""

    def __init__(self, verify: Verifier) -> None:
        self._verify = verify
        self.complete = False
        self.principal: KafkaPrincipal | None = None
        self.expires_at_ms: int | None = None

    def step(self, token: bytes, now_ms: int) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        if not self._verify(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.complete = True
        self.principal = KafkaPrincipal(USER_TYPE, user)
        return b""
