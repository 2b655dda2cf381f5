"""CreateAcls (key 30): add ACLs; each creation gets its own result.

Needs ALTER on the cluster (else every creation is CLUSTER_AUTHORIZATION_FAILED); without
an authorizer every creation is SECURITY_DISABLED, as in Kafka. A creation that is not a
concrete ACL (ANY or MATCH patterns, ANY operations, an empty name, a CLUSTER not named
``kafka-cluster``, a principal without a type, a malformed CIDR host) is INVALID_REQUEST
with Kafka's message; an ACL that exists already is a success. Versions (v1-3 served, as
Kafka 4.x): v1 resource pattern types (KIP-290); v2 flexible; v3 the USER resource type.
The answer is built as v3, typed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse
from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.handlers.describe_acls import NO_AUTHORIZER
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import (
    AclBinding,
    AclOperation,
    operation,
    pattern_type,
    permission,
    resource_type,
)

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = (1, 3)


def binding_of(c: Any) -> AclBinding:
    return AclBinding(resource_type(c.resource_type), c.resource_name,
                      pattern_type(c.resource_pattern_type), c.principal, c.host,
                      operation(c.operation), permission(c.permission_type))


def _all(ctx: RequestContext, code: ErrorCode, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(
        AclCreationResult(error_code=code, error_message=message) for _ in ctx.body.creations))


async def handle(ctx: RequestContext) -> CreateAclsResponse:
    ctx.hold()  # in order: applied once stored
    if not access.cluster_allowed(ctx, AclOperation.ALTER):
        return _all(ctx, ErrorCode.cluster_authorization_failed,
                    access.DENIED_MESSAGES[ErrorCode.cluster_authorization_failed])
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _all(ctx, ErrorCode.security_disabled, NO_AUTHORIZER)
    errors = await authorizer.create([binding_of(c) for c in ctx.body.creations])
    return CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(
        AclCreationResult(error_code=ErrorCode.none if e is None else ErrorCode.invalid_request,
                          error_message=e) for e in errors))
