"""What a request handler receives: the broker, the decoded request and its connection."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from samsa.protocol.build import build
from samsa.protocol.codec import Request, response_class
from samsa.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from samsa.broker.server import Broker

#: kio resolves the response class by name on every lookup; requests repeat a few dozen.
_response_class = cache(response_class)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request in flight."""

    broker: Broker
    request: Request
    client_host: str
    #: who the connection authenticated as (``User:ANONYMOUS`` without authentication)
    principal: KafkaPrincipal = ANONYMOUS
    #: the name of the listener the connection came in on (``PLAINTEXT`` for ``--listen``)
    listener: str = "PLAINTEXT"

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def body(self) -> Any:
        return self.request.body

    def respond(self, **fields: Any) -> Any:
        """The response entity of this request's API version, built from ``fields``."""
        return build(_response_class(self.request.api_key, self.request.api_version), fields)
