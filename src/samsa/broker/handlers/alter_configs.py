"""AlterConfigs (key 33): replace a resource's dynamic configs (TOPIC, BROKER, GROUP).

Legacy semantics: the configs given become all of the resource's dynamic configs; keys left
out return to their defaults. Versions: v1 is v0's schema; v2 flexible.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.config_admin import alter_all
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)


async def handle(ctx: RequestContext) -> Any:
    results = alter_all(ctx.broker, ctx.body.resources, bool(ctx.body.validate_only),
                        incremental=False)
    return ctx.respond(throttle_time=0, responses=results)
