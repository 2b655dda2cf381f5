"""DeleteTopics (key 20): delete topics and their data.

Of two deletions of one topic (on one node or two of a cluster) only the first succeeds: the
other is UNKNOWN_TOPIC_OR_PARTITION, or UNKNOWN_TOPIC_ID when asked by id, as Kafka answers.
Needs DELETE on the cluster or on each topic, else TOPIC_AUTHORIZATION_FAILED; a topic the
caller may not even DESCRIBE is refused so whether it exists or not (and, asked by id,
without its name), as Kafka's controller answers.

Versions (v1-6 served): v4 flexible; v5 error_message per topic; v6 topics by name or by
topic id (KIP-516), v1-5 by name only. The answer is built as v6, typed.
"""

from __future__ import annotations

import uuid

from kio.schema.delete_topics.v6.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.topics import TopicError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = (1, 6)

_ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext) -> DeleteTopicsResponse:
    if ctx.version >= 6:
        targets = [(t.name, t.topic_id) for t in ctx.body.topics]
    else:
        targets = [(name, None) for name in ctx.body.topic_names]
    ctx.hold()  # the deletions are awaited (and maybe the lookup): later requests see them
    # a topic another node has just created may be missing from the view
    await ctx.broker.topics.resolve([n for n, _ in targets],
                                    [t for _, t in targets if t != _ZERO_UUID])
    return DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(
        [await _delete_one(ctx, name, tid) for name, tid in targets]))


async def _delete_one(ctx: RequestContext, name: TopicName | None,
                      tid: uuid.UUID | None) -> DeletableTopicResult:
    broker = ctx.broker
    if tid is not None and tid != _ZERO_UUID:
        topic = broker.topics.by_id(tid)
        if topic is None:
            return _unknown_id(name, tid)
        name = TopicName(topic.name)
    refused = _refused(ctx, name or "")
    if refused is not None:
        hide = not refused and tid not in (None, _ZERO_UUID)  # by id: the name stays hidden
        return DeletableTopicResult(name=None if hide else name, topic_id=tid or _ZERO_UUID,
                                    error_code=ErrorCode.topic_authorization_failed,
                                    error_message=None)
    if not broker.config["delete.topic.enable"]:
        return DeletableTopicResult(name=name, topic_id=tid or _ZERO_UUID,
                                    error_code=ErrorCode.topic_deletion_disabled,
                                    error_message="Topic deletion is disabled.")
    try:
        topic = await broker.topics.delete(name or "")  # neither name nor id: unknown topic
    except TopicError as exc:
        if tid not in (None, _ZERO_UUID) and exc.error_code == ErrorCode.unknown_topic_or_partition:
            return _unknown_id(name, tid)  # deleted meanwhile by another node or request
        return DeletableTopicResult(name=name, topic_id=tid or _ZERO_UUID,
                                    error_code=ErrorCode(exc.error_code),
                                    error_message=exc.message)
    return DeletableTopicResult(name=name, topic_id=topic.topic_id, error_code=ErrorCode.none,
                                error_message=None)


def _unknown_id(name: TopicName | None, tid: uuid.UUID) -> DeletableTopicResult:
    return DeletableTopicResult(name=name, topic_id=tid, error_code=ErrorCode.unknown_topic_id,
                                error_message="This server does not host this topic ID.")


def _refused(ctx: RequestContext, name: str) -> bool | None:
    """None if the caller may delete the topic; else whether it may see its name."""
    if access.cluster_allowed(ctx, AclOperation.DELETE, log=False) or access.allowed(
            ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
        return None
    return access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log=False)
