"""EndTxn (key 26): commit or abort the producer's open transaction.

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Answered
once the decision (PrepareCommit / PrepareAbort) is durable; the markers follow.
Versions (v0-4 served): v1 the same; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3
flexible; v4 TRANSACTION_ABORTABLE may be answered (samsa never does). Built as v4, typed.
"""

from __future__ import annotations

from kio.schema.end_txn.v4.response import EndTxnResponse
from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.transactions import fenced_code
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import EndTxn

API_KEY = ApiKey.END_TXN
VERSIONS = (0, 4)
FENCED_VERSION = 2


async def handle(ctx: RequestContext) -> EndTxnResponse:
    body = ctx.body
    if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                          body.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    else:
        answer = await ctx.broker.transactions.call(EndTxn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed))
        code = fenced_code(answer.error_code, ctx.version, FENCED_VERSION)
    return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
