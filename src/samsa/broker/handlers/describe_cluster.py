"""DescribeCluster (key 60): this one-node cluster, its id and controller (this node).

Versions: v0 flexible; v1 endpoint_type (KIP-919): only brokers (1) are served, controller
endpoints (2) get UNSUPPORTED_ENDPOINT_TYPE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker import leadership
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)


async def handle(ctx: RequestContext) -> Any:
    config = ctx.broker.config
    endpoint_type = getattr(ctx.body, "endpoint_type", 1)
    if endpoint_type != 1:  # only brokers, no controller endpoints
        return ctx.respond(throttle_time=0, error_code=ErrorCode.unsupported_endpoint_type,
                           error_message="Only broker endpoints are served.",
                           endpoint_type=endpoint_type, cluster_id=str(config["cluster.id"]),
                           controller_id=-1, brokers=[], cluster_authorized_operations=-2147483648)
    return ctx.respond(
        throttle_time=0, error_code=ErrorCode.none, error_message=None, endpoint_type=1,
        cluster_id=str(config["cluster.id"]), controller_id=leadership.controller_id(ctx.broker),
        brokers=[{"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
                 for n in leadership.brokers(ctx.broker)],
        cluster_authorized_operations=-2147483648,
    )
