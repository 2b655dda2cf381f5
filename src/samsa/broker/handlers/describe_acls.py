"""DescribeAcls (key 29): the ACLs a filter matches, grouped by resource pattern.

Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED); without an authorizer the
answer is SECURITY_DISABLED, as in Kafka. A filter with an unknown element is
INVALID_REQUEST. Versions (v1-3 served, as Kafka 4.x): v1 resource pattern types (KIP-290:
LITERAL, PREFIXED, and ANY and MATCH in filters); v2 flexible; v3 the USER resource type.
The answer is built as v3, typed.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import (
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    operation,
    pattern_type,
    permission,
    resource_type,
)

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = (1, 3)

NO_AUTHORIZER = "No Authorizer is configured."


def filter_of(f: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or of one DeleteAcls filter (codes this broker
    does not know become UNKNOWN, which :meth:`AclBindingFilter.validate` refuses)."""
    return AclBindingFilter(resource_type(f.resource_type_filter), f.resource_name_filter,
                            pattern_type(f.pattern_type_filter), f.principal_filter,
                            f.host_filter, operation(f.operation), permission(f.permission_type))


def _error(code: ErrorCode, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time=NO_THROTTLE, error_code=code,
                                error_message=message, resources=())


async def handle(ctx: RequestContext) -> DescribeAclsResponse:
    if not access.cluster_allowed(ctx, AclOperation.DESCRIBE):
        return _error(ErrorCode.cluster_authorization_failed,
                      access.DENIED_MESSAGES[ErrorCode.cluster_authorization_failed])
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _error(ErrorCode.security_disabled, NO_AUTHORIZER)
    flt = filter_of(ctx.body)
    try:
        flt.validate()
    except InvalidAcl as exc:
        return _error(ErrorCode.invalid_request, str(exc))
    found = authorizer.describe(flt)  # sorted: one run per resource pattern
    resources = tuple(
        DescribeAclsResource(resource_type=i8(rtype), resource_name=name,
                             pattern_type=i8(ptype), acls=tuple(
                                 AclDescription(principal=b.principal, host=b.host,
                                                operation=i8(b.operation),
                                                permission_type=i8(b.permission))
                                 for b in acls))
        for (rtype, name, ptype), acls in groupby(
            found, key=lambda b: (b.resource_type, b.name, b.pattern_type)))
    return DescribeAclsResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                                error_message=None, resources=resources)
