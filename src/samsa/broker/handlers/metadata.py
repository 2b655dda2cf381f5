"""Metadata (key 3): brokers, topics and partitions; auto-creates topics like Kafka (awaited:
a cluster node writes the catalog off its event loop; a topic another request or node
creates meanwhile is answered as found).

Authorization as Kafka's: all topics lists only those the caller may DESCRIBE; a topic
asked for by name that it may not is TOPIC_AUTHORIZATION_FAILED (whether it exists or not),
by id TOPIC_AUTHORIZATION_FAILED with the id; creating a missing topic needs CREATE on the
cluster or on the topic. v8+ topic_authorized_operations and v8-10 the cluster's, when
asked for, are the operations the caller may do.

Versions (v0-12 served): v0 an empty topic list means all topics, v1+ null does; v1 rack,
controller_id, is_internal; v2 cluster_id; v3 throttle_time; v4
allow_auto_topic_creation; v5 offline_replicas; v7 leader_epoch; v8 authorized operations
(always "not requested"); v9 flexible; v10 topic ids in the answer (a request naming a
topic by id, or with a null name, is refused with INVALID_REQUEST on every topic before
v12, as Kafka's KafkaApis); v11 drops the cluster's authorized operations; v12 topics
looked up by id, null names.
The answer is built as v12, typed (as v10 for v8-10's cluster authorized operations).
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v10.response import MetadataResponse as MetadataResponseV10
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from samsa.broker import access, leadership
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.topics import Topic, TopicError, validate_topic_name
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, convert
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)

_ZERO_UUID = uuid.UUID(int=0)
_NO_OPERATIONS = i32(access.NOT_REQUESTED)
DESCRIBE, TOPIC = AclOperation.DESCRIBE, ResourceType.TOPIC


def topic_entry(ctx: RequestContext, topic: Topic) -> MetadataResponseTopic:
    parts = []
    for p in topic.partitions:
        node, epoch = leadership.leader(ctx.broker, p)
        nodes = (BrokerId(node),) if node >= 0 else ()
        parts.append(MetadataResponsePartition(
            error_code=ErrorCode.none if node >= 0 else ErrorCode.leader_not_available,
            partition_index=i32(p.index), leader_id=BrokerId(node), leader_epoch=i32(epoch),
            replica_nodes=nodes, isr_nodes=nodes, offline_replicas=()))
    return MetadataResponseTopic(
        error_code=ErrorCode.none, name=TopicName(topic.name), topic_id=topic.topic_id,
        is_internal=topic.internal, partitions=tuple(parts),
        topic_authorized_operations=_NO_OPERATIONS)


def _error_entry(
    name: str | None, code: ErrorCode, topic_id: uuid.UUID = _ZERO_UUID
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code, name=None if name is None else TopicName(name), topic_id=topic_id,
        is_internal=False, partitions=(), topic_authorized_operations=_NO_OPERATIONS)


def _requested(ctx: RequestContext) -> list[tuple[str | None, uuid.UUID | None]] | None:
    topics = ctx.body.topics
    if topics is None or (ctx.version == 0 and not topics):
        return None  # all topics
    out: list[tuple[str | None, uuid.UUID | None]] = []
    for t in topics:
        if ctx.version == 0:
            out.append((t.name, None))
        else:
            tid = getattr(t, "topic_id", None)
            out.append((t.name, tid if tid and tid != _ZERO_UUID else None))
    return out


def _refused_before_v12(ctx: RequestContext) -> MetadataResponse | None:
    """Kafka's answer to v10-11 topics named by id or without a name: every requested
    topic with INVALID_REQUEST (a null name answered as ""), and nothing else."""
    topics = ctx.body.topics
    if not 10 <= ctx.version < 12 or not topics:
        return None
    if all(t.name is not None and t.topic_id in (None, _ZERO_UUID) for t in topics):
        return None
    return MetadataResponse(
        throttle_time=NO_THROTTLE, brokers=(), cluster_id=None, controller_id=BrokerId(-1),
        topics=tuple(_error_entry(t.name or "", ErrorCode.invalid_request,
                                  t.topic_id or _ZERO_UUID) for t in topics))


async def handle(ctx: RequestContext) -> MetadataResponse | MetadataResponseV10:
    broker = ctx.broker
    refused = _refused_before_v12(ctx)
    if refused is not None:
        return refused
    requested = _requested(ctx)
    allow_create = getattr(ctx.body, "allow_auto_topic_creation", True) and bool(
        broker.config["auto.create.topics.enable"]
    )
    entries: list[MetadataResponseTopic] = []
    if requested is None:
        entries = [topic_entry(ctx, t) for t in broker.topics
                   if access.allowed(ctx, DESCRIBE, TOPIC, t.name, log=False)]
    else:
        # a topic another node has just created may be missing from the view
        await broker.topics.resolve([n for n, _ in requested], [i for _, i in requested],
                                    hold=ctx.hold)
        for name, tid in requested:
            entries.append(await _lookup(ctx, name, tid, allow_create))
    if getattr(ctx.body, "include_topic_authorized_operations", False):
        entries = [replace(e, topic_authorized_operations=i32(access.operations(
            ctx, TOPIC, e.name))) if e.name is not None and e.error_code not in _HIDDEN else e
            for e in entries]
    response = MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=tuple(MetadataResponseBroker(node_id=BrokerId(n.node_id), host=n.host,
                                             port=i32(n.port), rack=n.rack)
                      for n in leadership.brokers(broker, ctx.listener)),
        cluster_id=str(broker.config["cluster.id"]),
        controller_id=BrokerId(leadership.controller_id(broker)),
        topics=tuple(entries),
    )
    if 8 <= ctx.version <= 10 and ctx.body.include_cluster_authorized_operations:
        ops = access.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME) \
            if access.cluster_allowed(ctx, DESCRIBE) else 0
        return replace(convert(response, MetadataResponseV10),
                       cluster_authorized_operations=i32(ops))
    return response


_HIDDEN = (ErrorCode.topic_authorization_failed, ErrorCode.unknown_topic_id)
"""Topic answers that carry no authorized operations."""


async def _lookup(ctx: RequestContext, name: str | None, tid: uuid.UUID | None,
                  allow_create: bool) -> MetadataResponseTopic:
    topics = ctx.broker.topics
    if tid is not None:
        topic = topics.by_id(tid)
        if topic is None:
            return _error_entry(None, ErrorCode.unknown_topic_id, tid)
        if not access.allowed(ctx, DESCRIBE, TOPIC, topic.name):
            return _error_entry(None, ErrorCode.topic_authorization_failed, tid)
        return topic_entry(ctx, topic)
    if name is not None and not access.allowed(ctx, DESCRIBE, TOPIC, name):
        return _error_entry(name, ErrorCode.topic_authorization_failed)
    if name is None or validate_topic_name(name):
        return _error_entry(name, ErrorCode.invalid_topic_exception)
    topic = topics.get(name)
    if topic is not None:
        return topic_entry(ctx, topic)
    if not allow_create:
        return _error_entry(name, ErrorCode.unknown_topic_or_partition)
    if not (access.cluster_allowed(ctx, AclOperation.CREATE, log=False)
            or access.allowed(ctx, AclOperation.CREATE, TOPIC, name)):
        return _error_entry(name, ErrorCode.topic_authorization_failed)
    try:  # the connection's later requests were held by resolve: they see the topic
        topic = await topics.ensure(name, int(ctx.broker.config["num.partitions"]),
                                    now_ms=now_ms())
    except TopicError as exc:
        return _error_entry(name, ErrorCode(exc.error_code))
    return topic_entry(ctx, topic)
