"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

With a transactional id the transaction coordinator answers (:mod:`samsa.transactions`:
epoch bump, fencing, the previous instance's open transaction aborted first); it needs
WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); PRODUCER_FENCED
is INVALID_PRODUCER_EPOCH below v4. An idempotent producer needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka 2.8+, KIP-679), else
CLUSTER_AUTHORIZATION_FAILED. Versions: v2 flexible; v3
producer_id and producer_epoch (KIP-360: a producer that knows its id bumps its epoch
instead of getting a new id); v4 is v3's schema; v5 (KIP-890) is v4's too and may answer
TRANSACTION_ABORTABLE, which samsa never needs to. The answer is built as v4, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.transactions import fenced_code
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, millis
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from samsa.transactions import InitProducerId

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 5)

MAX_EPOCH = 32767
FENCED_VERSION = 4


async def handle(ctx: RequestContext) -> InitProducerIdResponse:
    ctx.hold()  # in order: the coordinator may wait before it handles it
    body = ctx.body
    if body.transactional_id is not None:
        tid = body.transactional_id
        if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return _answer(ErrorCode.transactional_id_authorization_failed, -1, -1)
        answer = await ctx.broker.transactions.call(InitProducerId(
            tid, millis(body.transaction_timeout), ctx.broker.producer_ids.allocate(),
            getattr(body, "producer_id", -1), getattr(body, "producer_epoch", -1)))
        return _answer(fenced_code(answer.error_code, ctx.version, FENCED_VERSION),
                       answer.producer_id, answer.producer_epoch)
    if not (access.cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE, log=False)
            or access.allowed_any(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        access.denied(ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
        return _answer(ErrorCode.cluster_authorization_failed, -1, -1)
    pid = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer that lost its state bumps its epoch.
        return _answer(ErrorCode.none, pid, epoch + 1)
    return _answer(ErrorCode.none, ctx.broker.producer_ids.allocate(), 0)


def _answer(code: ErrorCode, producer_id: int, epoch: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time=NO_THROTTLE, error_code=code,
                                  producer_id=ProducerId(producer_id), producer_epoch=i16(epoch))
