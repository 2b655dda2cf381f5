"""SaslAuthenticate (key 36) outside a SASL exchange.

Versions: v1 session_lifetime_ms (KIP-368); v2 flexible. On a SASL listener the
connection's exchange (:mod:`samsa.security.sasl.exchange`) answers it; one that reaches
this handler came on a listener without SASL (or after authentication completed) and is
answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis does. Built as v2, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse

from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = (0, 2)


async def handle(ctx: RequestContext) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.illegal_sasl_state, auth_bytes=b"",
        error_message="SaslAuthenticate request received after successful authentication")
