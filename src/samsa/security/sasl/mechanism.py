"""What a SASL server mechanism answers, whatever the mechanism."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from samsa.security.principal import KafkaPrincipal


class AuthenticationFailed(Exception):
    """The client's credentials were refused; ``str(exc)`` is sent to the client (so it never
    holds a password, nor whether a user exists)."""


class ServerMechanism(Protocol):
    """One authentication with one mechanism: client tokens in, challenges out."""

    #: True once the client is authenticated (then :attr:`principal` is set)
    complete: bool
    principal: KafkaPrincipal | None
    #: when the credential stops being valid (ms since the epoch), e.g. a token's ``exp``
    expires_at_ms: int | None

    def step(self, token: bytes, now_ms: int) -> bytes:
        """The challenge answering ``token``; raises :class:`AuthenticationFailed`."""
        ...


MechanismFactory = Callable[[], ServerMechanism]
"""Makes a fresh server mechanism for one authentication."""
