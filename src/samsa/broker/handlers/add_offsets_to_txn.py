"""AddOffsetsToTxn (key 25): the group's ``__consumer_offsets`` partition joins the
transaction, so TxnOffsetCommit may stage offsets for it.

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on
the group (else GROUP_AUTHORIZATION_FAILED).
Versions (v0-3 served): v1 the same; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3
flexible. Built as v3, typed.
"""

from __future__ import annotations

from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse
from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.topics import OFFSETS_TOPIC
from samsa.broker.transactions import fenced_code
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import AddPartitions

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = (0, 3)
FENCED_VERSION = 2


async def handle(ctx: RequestContext) -> AddOffsetsToTxnResponse:
    ctx.hold()  # in order: the coordinator may wait before it handles it
    body = ctx.body
    if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                          body.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        code = ErrorCode.group_authorization_failed
    else:
        partition = ctx.broker.groups.partition_for(body.group_id)
        answer = await ctx.broker.transactions.call(AddPartitions(
            body.transactional_id, body.producer_id, body.producer_epoch,
            ((OFFSETS_TOPIC, partition),)))
        code = fenced_code(answer.error_code, ctx.version, FENCED_VERSION)
    return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
