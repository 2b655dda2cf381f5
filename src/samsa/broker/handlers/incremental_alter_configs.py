"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND, SUBTRACT per config key.

Resources: TOPIC, BROKER (the node id, or "" for cluster-wide defaults; only settings that
Kafka lets change at run time) and GROUP (Kafka 4.x group configs). Needs ALTER_CONFIGS on
the topic or group, or on the cluster for a broker (else TOPIC_, GROUP_ or
CLUSTER_AUTHORIZATION_FAILED). Versions: v1 flexible.
The answer is built as v1, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from kio.static.primitive import i8

from samsa.broker import access
from samsa.broker.config_admin import alter_all
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)


async def handle(ctx: RequestContext) -> IncrementalAlterConfigsResponse:
    ctx.hold()  # the change may wait on the config store: later requests see it
    results = await alter_all(ctx.broker, ctx.body.resources, bool(ctx.body.validate_only),
                              refuse=access.config_refusals(ctx, AclOperation.ALTER_CONFIGS),
                              incremental=True)
    return IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE, responses=tuple(
        AlterConfigsResourceResponse(
            error_code=ErrorCode(r["error_code"]), error_message=r["error_message"],
            resource_type=i8(r["resource_type"]), resource_name=r["resource_name"])
        for r in results))
