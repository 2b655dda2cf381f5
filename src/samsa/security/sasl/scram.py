"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, KIP-84), the server side from ``scramp``,
against the salted credentials of a :class:`~samsa.security.credentials.CredentialStore`.

Every failure (unknown user, wrong proof, a malformed message) is answered with one
message, as Kafka does, so a client learns nothing about which users exist.
"""

from __future__ import annotations

from typing import Any

from scramp import ScramException, ScramMechanism

from samsa.security.credentials import MECHANISMS, CredentialStore
from samsa.security.principal import USER_TYPE, KafkaPrincipal
from samsa.security.sasl.mechanism import AuthenticationFailed

NAMES = tuple(MECHANISMS)


class _UnknownUser(Exception):
    pass


class ScramServer:
    """One SCRAM authentication: client-first, then client-final."""

    def __init__(self, mechanism: str, store: CredentialStore) -> None:
        self.mechanism = mechanism
        self._store = store
        self._server: Any = ScramMechanism(mechanism).make_server(self._lookup)
        self._user = ""
        self._stage = 0
        self.complete = False
        self.principal: KafkaPrincipal | None = None
        self.expires_at_ms: int | None = None

    def _lookup(self, user: Any) -> tuple[bytes, bytes, bytes, int]:
        self._user = str(user)
        cred = self._store.get(self._user, self.mechanism)
        if cred is None:
            raise _UnknownUser
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _failed(self) -> AuthenticationFailed:
        return AuthenticationFailed("Authentication failed during authentication due to "
                                    f"invalid credentials with SASL mechanism {self.mechanism}")

    def step(self, token: bytes, now_ms: int) -> bytes:
        try:
            text = token.decode()
            if self._stage == 0:
                self._server.set_client_first(text)
                authzid = text.split(",", 2)[1]
                if authzid.startswith("a=") and authzid[2:] != self._user:
                    raise AuthenticationFailed("Authentication failed: Client requested an "
                                               "authorization id that is different from "
                                               "username")
                self._stage = 1
                return str(self._server.get_server_first()).encode()
            if self._stage == 1:
                self._server.set_client_final(text)
                final = str(self._server.get_server_final())
                self._stage = 2
                self.complete = True
                self.principal = KafkaPrincipal(USER_TYPE, self._user)
                return final.encode()
        except (ScramException, _UnknownUser, UnicodeDecodeError, ValueError):
            raise self._failed() from None
        raise self._failed()
