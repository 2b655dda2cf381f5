"""SaslHandshake (key 17) outside a SASL exchange.

Versions: v0 (the tokens that follow are bare frames), v1 (they travel in SaslAuthenticate).
On a SASL listener the connection's exchange (:mod:`samsa.security.sasl.exchange`) answers
it, before authentication and to re-authenticate; a handshake that reaches this handler came
on a listener without SASL, and is answered ILLEGAL_SASL_STATE as Kafka's KafkaApis does.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = (0, 1)


async def handle(ctx: RequestContext) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
