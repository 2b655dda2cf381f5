"""Metadata (key 3): brokers, topics and partitions; auto-creates topics like Kafka.

Versions (v0-12 served): v0 an empty topic list means all topics, v1+ null does; v1 rack,
controller_id, is_internal; v2 cluster_id; v3 throttle_time; v4
allow_auto_topic_creation; v5 offline_replicas; v7 leader_epoch; v8 authorized operations
(always "not requested"); v9 flexible; v10 topic ids (Kafka looks topics up by id from v12;
samsa already from v10); v11 drops the cluster's authorized operations; v12 null names.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker import leadership
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.topics import Topic, TopicError, validate_topic_name
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)

_ZERO_UUID = uuid.UUID(int=0)


def topic_entry(ctx: RequestContext, topic: Topic) -> dict[str, Any]:
    leaders = [leadership.leader(ctx.broker, p) for p in topic.partitions]
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": ErrorCode.none if node >= 0 else ErrorCode.leader_not_available,
                "partition_index": p.index,
                "leader_id": node,
                "leader_epoch": epoch,
                "replica_nodes": [node] if node >= 0 else [],
                "isr_nodes": [node] if node >= 0 else [],
                "offline_replicas": [],
            }
            for p, (node, epoch) in zip(topic.partitions, leaders, strict=True)
        ],
        "topic_authorized_operations": -2147483648,
    }


def _error_entry(
    name: str | None, code: ErrorCode, topic_id: uuid.UUID = _ZERO_UUID
) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": -2147483648}


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


async def handle(ctx: RequestContext) -> Any:
    broker = ctx.broker
    requested = _requested(ctx)
    allow_create = getattr(ctx.body, "allow_auto_topic_creation", True) and bool(
        broker.config["auto.create.topics.enable"]
    )
    entries: list[dict[str, Any]] = []
    if requested is None:
        entries = [topic_entry(ctx, t) for t in broker.topics]
    else:
        for name, tid in requested:
            entries.append(_lookup(ctx, name, tid, allow_create))
    brokers = [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
               for n in leadership.brokers(broker)]
    return ctx.respond(
        throttle_time=0,
        brokers=brokers,
        cluster_id=str(broker.config["cluster.id"]),
        controller_id=leadership.controller_id(broker),
        topics=entries,
        cluster_authorized_operations=-2147483648,
    )


def _lookup(ctx: RequestContext, name: str | None, tid: uuid.UUID | None,
            allow_create: bool) -> dict[str, Any]:
    topics = ctx.broker.topics
    if tid is not None:
        topic = topics.by_id(tid)
        if topic is None:
            return _error_entry(None, ErrorCode.unknown_topic_id, tid)
        return topic_entry(ctx, topic)
    if name is None or validate_topic_name(name):
        return _error_entry(name, ErrorCode.invalid_topic_exception)
    topic = topics.get(name)
    if topic is not None:
        return topic_entry(ctx, topic)
    if not allow_create:
        return _error_entry(name, ErrorCode.unknown_topic_or_partition)
    try:
        topic = topics.create(name, int(ctx.broker.config["num.partitions"]), now_ms=now_ms())
    except TopicError as exc:
        return _error_entry(name, ErrorCode(exc.error_code))
    return topic_entry(ctx, topic)
