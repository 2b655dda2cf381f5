"""DeleteTopics (key 20): delete topics and their data.

Versions (v1-6 served): v4 flexible; v5 error_message per topic; v6 topics by name or by
topic id (KIP-516), v1-5 by name only.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.broker.topics import TopicError
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = (1, 6)

_ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext) -> Any:
    broker = ctx.broker
    if ctx.version >= 6:
        targets = [(t.name, t.topic_id) for t in ctx.body.topics]
    else:
        targets = [(name, None) for name in ctx.body.topic_names]
    results = []
    for name, tid in targets:
        if tid is not None and tid != _ZERO_UUID:
            topic = broker.topics.by_id(tid)
            if topic is None:
                results.append({"name": name, "topic_id": tid,
                                "error_code": ErrorCode.unknown_topic_id,
                                "error_message": "This server does not host this topic ID."})
                continue
            name = topic.name
        if not broker.config["delete.topic.enable"]:
            results.append({"name": name, "topic_id": tid or _ZERO_UUID,
                            "error_code": ErrorCode.topic_deletion_disabled,
                            "error_message": "Topic deletion is disabled."})
            continue
        try:
            topic = broker.topics.delete(name)
        except TopicError as exc:
            results.append({"name": name, "topic_id": tid or _ZERO_UUID,
                            "error_code": ErrorCode(exc.error_code), "error_message": exc.message})
            continue
        results.append({"name": name, "topic_id": topic.topic_id,
                        "error_code": ErrorCode.none, "error_message": None})
    return ctx.respond(throttle_time=0, responses=results)
