"""CreateTopics (key 19): create topics, or with validate_only only check them.

Needs CREATE on the cluster or on each topic (else TOPIC_AUTHORIZATION_FAILED,
"Authorization failed."); a created topic's configs are answered only with DESCRIBE_CONFIGS
on it (else its topic_config_error_code is TOPIC_AUTHORIZATION_FAILED), as in Kafka.

Versions (v2-7 served): v4 num_partitions and replication_factor may be -1 (the broker's
defaults) without assignments (KIP-464; accepted from v2 here); v5 flexible, and the
answer carries each topic's partitions, replication factor and configs (KIP-525); v6 is
v5's schema; v7 the topic id in the answer. A name given twice is INVALID_REQUEST.
The answer is built as v7, typed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kio.schema.create_topics.v7.response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32

from samsa.broker import access
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.topics import TopicError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = (2, 7)


#: DescribeConfigs' config sources: the topic's own setting, or the broker's default
_TOPIC_CONFIG, _DEFAULT_CONFIG = i8(1), i8(5)


async def handle(ctx: RequestContext) -> CreateTopicsResponse:
    validate_only = bool(getattr(ctx.body, "validate_only", False))
    ctx.hold()  # a shared catalog is written awaited: later requests see the topics
    seen: set[str] = set()
    dupes = {t.name for t in ctx.body.topics if t.name in seen or seen.add(t.name)}  # type: ignore[func-returns-value]
    results: list[CreatableTopicResult] = []
    names = [t.name for t in ctx.body.topics]
    creatable = set(names) if access.cluster_allowed(ctx, AclOperation.CREATE, log=False) \
        else access.allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = access.allowed_names(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                       names, log=False)
    for req in ctx.body.topics:
        if req.name in dupes:
            results.append(_error(req.name, ErrorCode.invalid_request,
                                  "Duplicate topic name in the request."))
            continue
        if req.name not in creatable:
            results.append(_error(req.name, ErrorCode.topic_authorization_failed,
                                  "Authorization failed."))
            continue
        result = await _create_one(ctx, req, validate_only)
        if not result.error_code and req.name not in describable:
            result = replace(result, num_partitions=i32(-1), replication_factor=i16(-1),
                             configs=(), topic_config_error_code=i16(
                                 ErrorCode.topic_authorization_failed))
        results.append(result)
    return CreateTopicsResponse(throttle_time=NO_THROTTLE, topics=tuple(results))


def _error(name: TopicName, code: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, topic_id=None, error_code=code, error_message=message,
                                num_partitions=i32(-1), replication_factor=i16(-1), configs=None)


async def _create_one(ctx: RequestContext, req: Any,
                      validate_only: bool) -> CreatableTopicResult:
    broker = ctx.broker
    node = broker.config.node_id
    if req.assignments:
        if req.num_partitions != -1 or req.replication_factor != -1:
            return _error(req.name, ErrorCode.invalid_request,
                          "Both numPartitions or replicationFactor and replicasAssignments "
                          "were set. Both cannot be used at the same time.")
        for a in req.assignments:
            if list(a.broker_ids) != [node]:
                return _error(req.name, ErrorCode.invalid_replica_assignment,
                              f"Replica assignment {list(a.broker_ids)} names brokers "
                              f"other than the only one, {node}.")
        count = len(req.assignments)
    else:
        count = req.num_partitions if req.num_partitions != -1 else int(
            broker.config["num.partitions"])
        rf = req.replication_factor if req.replication_factor != -1 else 1
        if rf <= 0:
            return _error(req.name, ErrorCode.invalid_replication_factor,
                          "Replication factor must be larger than 0, or -1 to use the default.")
        if rf > 1:
            return _error(req.name, ErrorCode.invalid_replication_factor,
                          f"Unable to replicate the partition {rf} time(s): The target "
                          "replication factor of "
                          f"{rf} cannot be reached because only 1 broker(s) are registered.")
    overrides = {c.name: c.value for c in req.configs if c.value is not None}
    try:
        topic = await broker.topics.create_topic(req.name, count, overrides, now_ms=now_ms(),
                                                 validate_only=validate_only)
    except TopicError as exc:
        return _error(req.name, ErrorCode(exc.error_code), exc.message)
    config = broker.topics.log_config(topic.overrides, topic.name).to_mapping()
    return CreatableTopicResult(
        name=req.name, topic_id=topic.topic_id, error_code=ErrorCode.none, error_message=None,
        num_partitions=i32(count), replication_factor=i16(1),
        configs=tuple(
            CreatableTopicConfigs(name=k, value=str(v), read_only=False, is_sensitive=False,
                                  config_source=_TOPIC_CONFIG if k in overrides
                                  else _DEFAULT_CONFIG)
            for k, v in sorted(config.items())),
    )
