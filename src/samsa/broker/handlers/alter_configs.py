"""AlterConfigs (key 33): replace a resource's dynamic configs (TOPIC, BROKER, GROUP).

Legacy semantics: the configs given become all of the resource's dynamic configs; keys left
out return to their defaults. Needs ALTER_CONFIGS on the topic or group, or on the
cluster for a broker (else TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED). Versions: v1 is
v0's schema; v2 flexible. The answer is built as v2, typed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.alter_configs.v2.response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from samsa.broker import access
from samsa.broker.config_admin import alter_all
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)


def result(r: dict[str, Any]) -> AlterConfigsResourceResponse:
    """One resource's outcome, from :func:`alter_all`'s mapping."""
    return AlterConfigsResourceResponse(
        error_code=ErrorCode(r["error_code"]), error_message=r["error_message"],
        resource_type=i8(r["resource_type"]), resource_name=r["resource_name"])


async def handle(ctx: RequestContext) -> AlterConfigsResponse:
    ctx.hold()  # the change may wait on the config store: later requests see it
    results = await alter_all(ctx.broker, ctx.body.resources, bool(ctx.body.validate_only),
                              refuse=access.config_refusals(ctx, AclOperation.ALTER_CONFIGS),
                              incremental=False)
    return AlterConfigsResponse(throttle_time=NO_THROTTLE,
                                responses=tuple(result(r) for r in results))
