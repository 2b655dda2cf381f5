"""DescribeConfigs (key 32): topic configs (with sources) and broker configs."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext
from samsa.broker.topics import BROKER_TO_TOPIC

API_KEY = 32
VERSIONS = (1, 4)

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# ConfigSource values
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType values (v3+)
_TYPES = {bool: 1, str: 2, int: 5}
_TOPIC_TO_BROKER = {v: k for k, v in BROKER_TO_TOPIC.items()}


def _entry(name: str, value: str | None, source: int, synonyms: list[dict[str, Any]],
           config_type: int, doc: str | None) -> dict[str, Any]:
    return {"name": name, "value": value, "read_only": False, "config_source": source,
            "is_default": source == DEFAULT_CONFIG, "is_sensitive": False,
            "synonyms": synonyms, "config_type": config_type, "documentation": doc}


def _topic(ctx: RequestContext, name: str, keys: set[str] | None) -> dict[str, Any]:
    topic = ctx.broker.topics.get(name)
    if topic is None:
        return {"error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": f"Topic {name} does not exist", "resource_type": TOPIC,
                "resource_name": name, "configs": []}
    explicit_broker = {s.name for s, _, default in ctx.broker.config.items() if not default}
    mapping = ctx.broker.topics.log_config(topic.overrides, name).to_mapping()
    synonyms_wanted = bool(getattr(ctx.body, "include_synonyms", False))
    configs = []
    for key, value in sorted(mapping.items()):
        if keys is not None and key not in keys:
            continue
        broker_key = _TOPIC_TO_BROKER.get(key)
        if key in topic.overrides:
            source = TOPIC_CONFIG
        elif broker_key in explicit_broker:
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
        synonyms = []
        if synonyms_wanted:
            synonyms.append({"name": key, "value": str(value), "source": source})
        configs.append(_entry(key, str(value), source, synonyms, 2, None))
    return {"error_code": ErrorCode.none, "error_message": None, "resource_type": TOPIC,
            "resource_name": name, "configs": configs}


def _broker(ctx: RequestContext, name: str, keys: set[str] | None) -> dict[str, Any]:
    if name not in ("", str(ctx.broker.config.node_id)):
        return {"error_code": ErrorCode.invalid_request,
                "error_message": f"Unexpected broker id, expected {ctx.broker.config.node_id}",
                "resource_type": BROKER, "resource_name": name, "configs": []}
    configs = []
    for setting, value, default in ctx.broker.config.items():
        if keys is not None and setting.name not in keys:
            continue
        text = str(value).lower() if setting.type is bool else str(value)
        configs.append(_entry(setting.name, text, DEFAULT_CONFIG if default else
                              STATIC_BROKER_CONFIG, [], _TYPES.get(setting.type, 2), setting.doc))
    return {"error_code": ErrorCode.none, "error_message": None, "resource_type": BROKER,
            "resource_name": name, "configs": configs}


async def handle(ctx: RequestContext) -> Any:
    results = []
    for r in ctx.body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        if r.resource_type == TOPIC:
            results.append(_topic(ctx, r.resource_name, keys))
        elif r.resource_type == BROKER:
            results.append(_broker(ctx, r.resource_name, keys))
        else:
            results.append({"error_code": ErrorCode.invalid_request,
                            "error_message": f"Unsupported resource type {r.resource_type}",
                            "resource_type": r.resource_type, "resource_name": r.resource_name,
                            "configs": []})
    return ctx.respond(throttle_time=0, results=results)
