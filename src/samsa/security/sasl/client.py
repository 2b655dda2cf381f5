"""The client side of each SASL mechanism, for samsa's own clients (``samsa.client.net``).

A :class:`ClientMechanism` gives the first token, then a token for each server challenge,
until :attr:`ClientMechanism.complete`. SCRAM uses ``scramp`` and checks the server's
signature (a broker that does not know the password cannot pass).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from scramp import ScramClient, ScramException

from samsa.security.credentials import MECHANISMS


class ClientAuthError(Exception):
    """The exchange cannot go on (a bad server message)."""


class ClientMechanism(Protocol):
    complete: bool

    def first(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token, or None when the exchange is complete."""
        ...


class PlainClient:
    def __init__(self, user: str, password: str) -> None:
        self._token = b"\0" + user.encode() + b"\0" + password.encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        self.complete = True
        return None


class ScramClientMechanism:
    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self._client: Any = ScramClient([mechanism], user, password)
        self._stage = 0
        self.complete = False

    def first(self) -> bytes:
        return str(self._client.get_client_first()).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        try:
            if self._stage == 0:
                self._stage = 1
                self._client.set_server_first(challenge.decode())
                return str(self._client.get_client_final()).encode()
            self._client.set_server_final(challenge.decode())
        except (ScramException, UnicodeDecodeError) as exc:
            raise ClientAuthError(f"SCRAM exchange failed: {exc}") from None
        self.complete = True
        return None


class OAuthBearerClient:
    """RFC 7628's client message around a token from ``token_provider()``."""

    def __init__(self, token_provider: Callable[[], str]) -> None:
        self._provider = token_provider
        self.complete = False

    def first(self) -> bytes:
        return f"n,,\x01auth=Bearer {self._provider()}\x01\x01".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if challenge:  # an error challenge: acknowledge it, the server then refuses
            return b"\x01"
        self.complete = True
        return None


def mechanism(name: str, *, username: str | None = None, password: str | None = None,
              token_provider: Callable[[], str] | None = None) -> ClientMechanism:
    """A fresh client mechanism by SASL name (ValueError for missing credentials)."""
    if name == "PLAIN" or name in MECHANISMS:
        if username is None or password is None:
            raise ValueError(f"SASL {name} needs a username and a password")
        if name == "PLAIN":
            return PlainClient(username, password)
        return ScramClientMechanism(name, username, password)
    if name == "OAUTHBEARER":
        if token_provider is None:
            raise ValueError("SASL OAUTHBEARER needs a token provider")
        return OAuthBearerClient(token_provider)
    raise ValueError(f"unsupported SASL mechanism {name!r}")
