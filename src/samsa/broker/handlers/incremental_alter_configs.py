"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND, SUBTRACT per config key.

Resources: TOPIC, BROKER (the node id, or "" for cluster-wide defaults; only settings that
Kafka lets change at run time) and GROUP (Kafka 4.x group configs). Versions: v1 flexible.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.config_admin import alter_all
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)


async def handle(ctx: RequestContext) -> Any:
    results = alter_all(ctx.broker, ctx.body.resources, bool(ctx.body.validate_only),
                        incremental=True)
    return ctx.respond(throttle_time=0, responses=results)
