"""Heartbeat (key 12): a classic group member's liveness, and how it learns of a rebalance.

Versions: v1 throttle_time in the response; v3 group_instance_id (static membership,
FENCED_INSTANCE_ID); v4 flexible. The answer is built as v4, typed, and encoded once per
version and error code (:mod:`samsa.protocol.answers`).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.coordinator import Heartbeat
from samsa.coordinator import responses as co
from samsa.protocol.answers import AnswerMemo
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.protocol.codec import Encoded
from samsa.security.acl import AclOperation

API_KEY = ApiKey.HEARTBEAT
VERSIONS = (0, 4)


def _typed(answer: co.HeartbeatResponse) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode(answer.error_code))


_ANSWERS = AnswerMemo(API_KEY, _typed)


async def handle(ctx: RequestContext) -> Encoded:
    body = ctx.body
    resp = await access.call_group(ctx, Heartbeat(
        group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None)), AclOperation.READ)
    assert isinstance(resp, co.HeartbeatResponse)
    return _ANSWERS(ctx.version, resp)
