"""DescribeCluster (key 60): this one-node cluster, its id and controller (this node).

Anyone may ask; cluster_authorized_operations, when asked for, are the operations the caller
may do on the cluster (0 without DESCRIBE on it, as in Kafka). Versions: v0 flexible; v1
endpoint_type (KIP-919): only brokers (1) are served, controller endpoints (2) get
UNSUPPORTED_ENDPOINT_TYPE. The answer is built as v1, typed.
"""

from __future__ import annotations

from kio.schema.describe_cluster.v1.response import DescribeClusterBroker, DescribeClusterResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)

BROKER_ENDPOINTS = 1
_NO_OPERATIONS = i32(access.NOT_REQUESTED)


async def handle(ctx: RequestContext) -> DescribeClusterResponse:
    cluster_id = str(ctx.broker.config["cluster.id"])
    endpoint_type = getattr(ctx.body, "endpoint_type", BROKER_ENDPOINTS)
    if endpoint_type != BROKER_ENDPOINTS:  # no controller endpoints
        return DescribeClusterResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.unsupported_endpoint_type,
            error_message="Only broker endpoints are served.", endpoint_type=i8(endpoint_type),
            cluster_id=cluster_id, controller_id=BrokerId(-1), brokers=(),
            cluster_authorized_operations=_NO_OPERATIONS)
    return DescribeClusterResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        endpoint_type=i8(BROKER_ENDPOINTS), cluster_id=cluster_id,
        controller_id=BrokerId(leadership.controller_id(ctx.broker)),
        brokers=tuple(DescribeClusterBroker(broker_id=BrokerId(n.node_id), host=n.host,
                                            port=i32(n.port), rack=n.rack)
                      for n in leadership.brokers(ctx.broker, ctx.listener)),
        cluster_authorized_operations=_operations(ctx),
    )


def _operations(ctx: RequestContext) -> i32:
    if not ctx.body.include_cluster_authorized_operations:
        return _NO_OPERATIONS
    if not access.cluster_allowed(ctx, AclOperation.DESCRIBE):
        return i32(0)
    return i32(access.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME))
