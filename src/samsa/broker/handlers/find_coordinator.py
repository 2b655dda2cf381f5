"""FindCoordinator (key 10): the node owning the group's ``__consumer_offsets`` shard, or
the transactional id's ``__transaction_state`` shard (a single node: this one, once the
topic exists; the first transaction key creates it and is answered
COORDINATOR_NOT_AVAILABLE meanwhile, as in Kafka).

A group key needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), a transaction
key DESCRIBE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

Versions: v1 key_type (0 group, 1 transaction),
throttle_time and error_message; v3 flexible; v4 several keys per request (KIP-699), each
with its own answer. The answer is built typed, as v4 or (the shapes differ) as v3 for
v0-3.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import response as v3
from kio.schema.find_coordinator.v4 import response as v4
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)

GROUP, TRANSACTION = 0, 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> v4.Coordinator:
    if key_type == GROUP and not access.allowed(ctx, AclOperation.DESCRIBE,
                                                ResourceType.GROUP, key):
        return _error(key, ErrorCode.group_authorization_failed,
                      access.DENIED_MESSAGES[ErrorCode.group_authorization_failed])
    if key_type == TRANSACTION and not access.allowed(ctx, AclOperation.DESCRIBE,
                                                      ResourceType.TRANSACTIONAL_ID, key):
        return _error(key, ErrorCode.transactional_id_authorization_failed,
                      access.DENIED_MESSAGES[ErrorCode.transactional_id_authorization_failed])
    if key_type not in (GROUP, TRANSACTION):
        message = f"unsupported coordinator key type {key_type}"
        return _error(key, ErrorCode.invalid_request, message)
    if key_type == TRANSACTION:
        code, node = leadership.txn_coordinator(ctx.broker, key, ctx.listener)
    else:
        code, node = leadership.coordinator(ctx.broker, key, ctx.listener)
    if code or node is None:
        return _error(key, code, None)
    return v4.Coordinator(key=key, node_id=BrokerId(node.node_id), host=node.host,
                          port=i32(node.port), error_code=ErrorCode.none, error_message=None)


def _error(key: str, code: ErrorCode, message: str | None) -> v4.Coordinator:
    return v4.Coordinator(key=key, node_id=BrokerId(-1), host="", port=i32(-1), error_code=code,
                          error_message=message)


async def handle(ctx: RequestContext) -> v3.FindCoordinatorResponse | v4.FindCoordinatorResponse:
    body = ctx.body
    key_type = getattr(body, "key_type", GROUP)
    if ctx.version >= 4:
        found = tuple(_lookup(ctx, key, key_type) for key in body.coordinator_keys)
        return v4.FindCoordinatorResponse(throttle_time=NO_THROTTLE, coordinators=found)
    one = _lookup(ctx, body.key, key_type)
    return v3.FindCoordinatorResponse(throttle_time=NO_THROTTLE, error_code=one.error_code,
                                      error_message=one.error_message, node_id=one.node_id,
                                      host=one.host, port=one.port)
