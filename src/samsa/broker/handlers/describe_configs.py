"""DescribeConfigs (key 32): topic, broker and group configs with their sources.

As Kafka's ConfigHelper: a value's source is the first layer that sets it (topic or group
config, then the broker's dynamic per-broker and cluster-default settings, static settings,
defaults), and with ``include_synonyms`` every layer is listed. ``BROKER`` named by the
node id describes every setting (read-only unless it may change at run time); ``BROKER``
named "" describes only the cluster-wide dynamic defaults. Needs DESCRIBE_CONFIGS on the topic
or group, or on the cluster for a broker (else TOPIC_, GROUP_ or
CLUSTER_AUTHORIZATION_FAILED). Versions (v1-4 served): v1
include_synonyms; v2 is v1's schema; v3 include_documentation, and each config's type and
documentation; v4 flexible. The answer is built as v4, typed.
"""

from __future__ import annotations

from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from samsa.broker import access
from samsa.broker.config import SETTINGS, Setting
from samsa.broker.config_admin import BROKER, GROUP, TOPIC
from samsa.broker.context import RequestContext
from samsa.broker.dynamic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_SETTINGS,
    GROUP_STRING_DEFAULTS,
    GROUP_SYNONYMS,
    Resolved,
)
from samsa.broker.topics import BROKER_TO_TOPIC
from samsa.log.config import BROKER_SYNONYMS, CONFIG_TYPES
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (1, 4)

TOPIC_CONFIG = 1
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
"""ConfigType ids (DescribeConfigs v3+)."""
_TYPES = {bool: BOOLEAN, str: STRING, int: INT}
LONG_SETTINGS = frozenset({
    "log.roll.ms", "log.retention.ms", "log.retention.bytes", "log.retention.check.interval.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.flush.interval.ms", "offsets.retention.check.interval.ms",
})
"""Integer broker settings that Kafka defines as LONG; the others are INT."""
LIST_SETTINGS = frozenset({
    "log.cleanup.policy", "group.coordinator.rebalance.protocols", "group.consumer.assignors",
})
"""Comma-separated broker settings that Kafka defines as LIST."""
_TOPIC_TO_BROKER = {v: k for k, v in BROKER_TO_TOPIC.items()}
_BY_NAME = {s.name: s for s in SETTINGS}


def _entry(name: str, resolved: Resolved, synonyms: bool, config_type: int,
           doc: str | None, read_only: bool = False) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=name, value=resolved.value, read_only=read_only,
        config_source=i8(resolved.source), is_sensitive=False, config_type=i8(config_type),
        documentation=doc,
        synonyms=tuple(DescribeConfigsSynonym(name=n, value=v, source=i8(s))
                       for n, v, s in resolved.synonyms) if synonyms else ())


def _result(rtype: int, name: str, configs: list[DescribeConfigsResourceResult],
            code: ErrorCode = ErrorCode.none,
            message: str | None = None) -> DescribeConfigsResult:
    return DescribeConfigsResult(error_code=code, error_message=message,
                                 resource_type=i8(rtype), resource_name=name,
                                 configs=tuple(configs))


def _wanted(keys: set[str] | None, name: str) -> bool:
    return keys is None or name in keys


def _topic(ctx: RequestContext, name: str, keys: set[str] | None, synonyms: bool,
           docs: bool) -> DescribeConfigsResult:
    topics = ctx.broker.topics
    topic = topics.get(name)
    if topic is None:
        return _result(TOPIC, name, [], ErrorCode.unknown_topic_or_partition,
                       f"Topic {name} does not exist")
    dynamic = topics.dynamic
    mapping = topics.log_config(topic.overrides, name).to_mapping()
    configs = []
    for key, value in sorted(mapping.items()):
        if not _wanted(keys, key):
            continue
        layers: list[tuple[str, str | None, int]] = []
        if key in topic.overrides:
            layers.append((key, value, TOPIC_CONFIG))
        broker_key = _TOPIC_TO_BROKER.get(key)
        if broker_key is not None:
            layers.extend(dynamic.resolve_broker(broker_key).synonyms)
        else:
            layers.append((BROKER_SYNONYMS[key], value, DEFAULT_CONFIG))
        # The effective value can differ from the broker layer for internal topics.
        resolved = Resolved(value, layers[0][2], tuple(layers))
        setting = _BY_NAME.get(broker_key or "")
        configs.append(_entry(key, resolved, synonyms, CONFIG_TYPES[key],
                              setting.doc if docs and setting else None))
    return _result(TOPIC, name, configs)


def _broker(ctx: RequestContext, name: str, keys: set[str] | None, synonyms: bool,
            docs: bool) -> DescribeConfigsResult:
    node = ctx.broker.config.node_id
    if name and name != str(node):
        return _result(BROKER, name, [], ErrorCode.invalid_request,
                       f"Unexpected broker id, expected {node} or empty string, but received "
                       f"{name}")
    dynamic = ctx.broker.topics.dynamic
    configs = []
    setting: Setting
    for setting in SETTINGS:
        if not _wanted(keys, setting.name):
            continue
        resolved = dynamic.resolve_broker(setting.name, per_broker=bool(name))
        if not resolved.synonyms:
            continue  # "": only the settings with a cluster-wide dynamic default
        configs.append(_entry(setting.name, resolved, synonyms, _type(setting),
                              setting.doc if docs else None,
                              read_only=setting.name not in DYNAMIC_BROKER_SETTINGS))
    return _result(BROKER, name, configs)


def _group(ctx: RequestContext, name: str, keys: set[str] | None, synonyms: bool,
           docs: bool) -> DescribeConfigsResult:
    if not name:
        return _result(GROUP, name, [], ErrorCode.invalid_request, "Group name must not be empty")
    dynamic = ctx.broker.topics.dynamic
    configs = []
    for key in sorted(GROUP_SYNONYMS):
        if _wanted(keys, key):
            setting = _BY_NAME[GROUP_SYNONYMS[key]]
            configs.append(_entry(key, dynamic.resolve_group(name, key), synonyms,
                                  _type(setting), setting.doc if docs else None))
    for key in sorted(GROUP_STRING_DEFAULTS):
        if _wanted(keys, key):
            configs.append(_entry(key, dynamic.resolve_group(name, key), synonyms, STRING,
                                  _GROUP_STRING_DOCS[key] if docs else None))
    return _result(GROUP, name, configs)


_GROUP_STRING_DOCS = {
    "share.auto.offset.reset": "Where a share group starts reading a partition: latest, "
                               "earliest or by_duration:<ISO-8601>.",
    "errors.deadletterqueue.topic.name": "The topic a share group copies records it rejects "
                                         "or archives at the delivery limit to (KIP-1191).",
}


def _type(setting: Setting) -> int:
    if setting.name in LIST_SETTINGS:
        return LIST
    if setting.name in LONG_SETTINGS:
        return LONG
    return _TYPES.get(setting.type, STRING)


async def handle(ctx: RequestContext) -> DescribeConfigsResponse:
    synonyms = bool(getattr(ctx.body, "include_synonyms", False))
    docs = bool(getattr(ctx.body, "include_documentation", False))
    results = []
    # a topic another node has just created may be missing from the view
    await ctx.broker.topics.resolve([r.resource_name for r in ctx.body.resources
                                     if r.resource_type == TOPIC], hold=ctx.hold)
    for r in ctx.body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        describe = {TOPIC: _topic, BROKER: _broker, GROUP: _group}.get(r.resource_type)
        if describe is None:
            results.append(_result(r.resource_type, r.resource_name, [],
                                   ErrorCode.invalid_request,
                                   f"Unsupported resource type {r.resource_type}"))
            continue
        refused = access.config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type,
                                        r.resource_name)
        if refused is not None:
            results.append(_result(r.resource_type, r.resource_name, [], *refused))
            continue
        results.append(describe(ctx, r.resource_name, keys, synonyms, docs))
    return DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=tuple(results))
