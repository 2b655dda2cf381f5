"""ApiVersions (key 18): advertise exactly the APIs and versions this broker serves.

Versions: v1 throttle_time; v3 flexible, client_software_name/version (KIP-511: a name or
version that is not alphanumerics, '.' and '-' gets INVALID_REQUEST). A version this broker
does not serve is answered UNSUPPORTED_VERSION in a v0 body, as Kafka does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.broker.handlers.consumer_group_heartbeat import (
    CONSUMER_PROTOCOL_APIS,
    consumer_protocol_enabled,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import response_class

if TYPE_CHECKING:
    from samsa.broker.server import Broker

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 3)


def _api_keys(broker: Broker) -> list[dict[str, int]]:
    hidden = () if consumer_protocol_enabled(broker.config) else CONSUMER_PROTOCOL_APIS
    return [
        {"api_key": key, "min_version": lo, "max_version": hi}
        for key, (lo, hi) in sorted(broker.supported.items()) if key not in hidden
    ]


def unsupported_version_response(broker: Broker) -> Any:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body."""
    return build(
        response_class(API_KEY, 0),
        {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(broker)},
    )


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    if ctx.version >= 3:
        name = body.client_software_name
        ver = body.client_software_version
        if not _valid_software(name) or not _valid_software(ver):
            return ctx.respond(error_code=ErrorCode.invalid_request, api_keys=_api_keys(ctx.broker))
    return ctx.respond(error_code=ErrorCode.none, api_keys=_api_keys(ctx.broker), throttle_time=0)


def _valid_software(value: str) -> bool:
    """KIP-511: alphanumerics, '.', '-', starting and ending with an alphanumeric."""
    if not value:
        return False
    ok = all(c.isascii() and (c.isalnum() or c in ".-") for c in value)
    return ok and value[0].isalnum() and value[-1].isalnum()
