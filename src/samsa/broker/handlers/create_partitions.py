"""CreatePartitions (key 37): grow a topic's partition count (validate_only: check only).

Needs ALTER on each topic (else TOPIC_AUTHORIZATION_FAILED). Versions: v1 is v0's schema;
v2 flexible; v3 is v2's schema. Assignments may only name this broker. The answer is
built as v3, typed.
"""

from __future__ import annotations

from kio.schema.create_partitions.v3.response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.topics import TopicError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = (0, 3)


async def handle(ctx: RequestContext) -> CreatePartitionsResponse:
    results = []
    ctx.hold()  # the change is awaited (and maybe the lookup): later requests see it
    # a topic another node has just created may be missing from the view
    await ctx.broker.topics.resolve([t.name for t in ctx.body.topics])
    alterable = access.allowed_names(ctx, AclOperation.ALTER, ResourceType.TOPIC,
                                     [t.name for t in ctx.body.topics])
    for t in ctx.body.topics:
        code, message = ErrorCode.none, None
        if t.name not in alterable:
            code = ErrorCode.topic_authorization_failed
        elif t.assignments is not None and any(
            list(a.broker_ids) != [ctx.broker.config.node_id] for a in t.assignments
        ):
            code, message = ErrorCode.invalid_replica_assignment, "Unknown broker in assignment."
        else:
            try:
                await ctx.broker.topics.add_partitions(t.name, t.count, now_ms=now_ms(),
                                                       validate_only=ctx.body.validate_only)
            except TopicError as exc:
                code, message = ErrorCode(exc.error_code), exc.message
        results.append(CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                   error_message=message))
    return CreatePartitionsResponse(throttle_time=NO_THROTTLE, results=tuple(results))
