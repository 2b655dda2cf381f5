"""InitProducerId (key 22): producer ids for idempotent producers (no transactions).

A transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Versions: v2 flexible; v3
producer_id and producer_epoch (KIP-360: a producer that knows its id bumps its epoch
instead of getting a new id); v4 is v3's schema.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 4)

MAX_EPOCH = 32767


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    if body.transactional_id is not None:
        # Transactions are not implemented: refuse clearly rather than pretend.
        code = ErrorCode.transactional_id_authorization_failed
        return ctx.respond(throttle_time=0, error_code=code, producer_id=-1, producer_epoch=-1)
    pid = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer that lost its state bumps its epoch.
        return ctx.respond(throttle_time=0, error_code=ErrorCode.none, producer_id=pid,
                           producer_epoch=epoch + 1)
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none,
                       producer_id=ctx.broker.producer_ids.allocate(), producer_epoch=0)
