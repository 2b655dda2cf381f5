"""EndTxn (key 26): commit or abort the producer's open transaction.

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Answered
once the decision (PrepareCommit / PrepareAbort) is durable; the markers follow.
Versions (v0-5 served): v1 the same; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3
flexible; v4 TRANSACTION_ABORTABLE may be answered (samsa never does); v5 transactions v2
(KIP-890): the producer's epoch is bumped at every end and the answer carries the producer
id and epoch to go on with. Built as v5, typed.
"""

from __future__ import annotations

from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.transactions import fenced_code
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import EndTxn

API_KEY = ApiKey.END_TXN
VERSIONS = (0, 5)
TV2_VERSION = 5
FENCED_VERSION = 2


async def handle(ctx: RequestContext) -> EndTxnResponse:
    ctx.hold()  # in order: the coordinator may wait before it handles it
    body = ctx.body
    if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                          body.transactional_id):
        return EndTxnResponse(throttle_time=NO_THROTTLE,
                              error_code=ErrorCode.transactional_id_authorization_failed)
    answer = await ctx.broker.transactions.call(EndTxn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
        bump=ctx.version >= TV2_VERSION))
    return EndTxnResponse(throttle_time=NO_THROTTLE,
                          error_code=fenced_code(answer.error_code, ctx.version, FENCED_VERSION),
                          producer_id=ProducerId(answer.producer_id),
                          producer_epoch=i16(answer.producer_epoch))
