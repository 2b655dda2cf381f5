"""One connection's authentication, for the broker's connection to consult (no I/O here).

The connection tells :class:`Authentication` when TLS is up (the peer certificate) and asks
it about every frame until it is authenticated:

* PLAINTEXT: authenticated at once, as ``User:ANONYMOUS`` (an in-process connection of the
  broker's own, as its listener security names: the console's principal).
* SSL: authenticated once TLS is up; with a client certificate (``ssl.client.auth``) the
  principal is ``User:<subject DN>`` through ``ssl.principal.mapping.rules``, without one
  ``User:ANONYMOUS`` (as Kafka).
* SASL_PLAINTEXT, SASL_SSL: the :class:`~samsa.security.sasl.exchange.SaslExchange` decides;
  the principal is the SASL one. Frames before authentication are bounded by
  ``sasl.server.max.receive.size``, and any request but ApiVersions, SaslHandshake and
  SaslAuthenticate closes the connection before it is even decoded.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import Request
from samsa.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from samsa.security.sasl.exchange import Reply, SaslExchange
from samsa.security.setup import ListenerSecurity
from samsa.security.tls import subject_dn

_BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class Authentication:
    """Who one connection is, and whether it may send requests yet."""

    def __init__(self, security: ListenerSecurity) -> None:
        self.security = security
        self.listener = security.listener.name
        self.sasl = SaslExchange(security.mechanisms, security.max_reauth_ms) \
            if security.listener.sasl else None
        self.principal: KafkaPrincipal = security.principal or ANONYMOUS
        #: TLS is up (or not needed)
        self.tls_done = not security.listener.tls

    @property
    def authenticated(self) -> bool:
        return self.tls_done and (self.sasl is None or self.sasl.authenticated)

    def max_frame(self, limit: int) -> int:
        """The largest frame accepted now (smaller before SASL authentication)."""
        if self.sasl is not None and not self.sasl.authenticated:
            return min(limit, self.security.max_receive)
        return limit

    def tls_established(self, peercert: dict[str, Any] | None) -> None:
        """TLS is up; a client certificate names the principal (ValueError: no mapping
        rule applies)."""
        self.tls_done = True
        mapper = self.security.mapper
        if mapper is not None and peercert and peercert.get("subject"):
            self.principal = KafkaPrincipal(USER_TYPE, mapper.name(subject_dn(peercert)))

    @property
    def expects_raw_token(self) -> bool:
        """The next frame is a bare SASL token (after a SaslHandshake v0)."""
        return self.sasl is not None and self.sasl.expects_raw_token

    def admits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may even be decoded now."""
        return self.authenticated or api_key in _BEFORE_AUTH

    def on_request(self, request: Request, now_ms: int) -> Reply | None:
        """What to do with a decoded request: None to serve it, else the SASL reply."""
        if self.sasl is None:
            return None
        reply = self.sasl.on_request(request.api_key, request.api_version, request.body, now_ms)
        self._update()
        return None if reply.dispatch else reply

    def on_raw(self, token: bytes, now_ms: int) -> Reply:
        assert self.sasl is not None
        reply = self.sasl.on_raw(token, now_ms)
        self._update()
        return reply

    def _update(self) -> None:
        assert self.sasl is not None
        if self.sasl.principal is not None:
            self.principal = self.sasl.principal
