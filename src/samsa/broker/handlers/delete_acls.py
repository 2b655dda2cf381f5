"""DeleteAcls (key 31): remove the ACLs each filter matches; each filter answers the ACLs
it removed.

Needs ALTER on the cluster (else every filter is CLUSTER_AUTHORIZATION_FAILED); without an
authorizer every filter is SECURITY_DISABLED, as in Kafka. A filter with an unknown element
is INVALID_REQUEST ("Unknown patternFilter." / "Unknown entryFilter."), the others still
apply. Versions (v1-3 served, as Kafka 4.x): v1 resource pattern types (KIP-290); v2
flexible; v3 the USER resource type. The answer is built as v3, typed.
"""

from __future__ import annotations

from kio.schema.delete_acls.v3.response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.handlers.describe_acls import NO_AUTHORIZER, filter_of
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclBinding, AclBindingFilter, AclOperation, InvalidAcl

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = (1, 3)


def _result(code: ErrorCode, message: str | None,
            removed: list[AclBinding] | None = None) -> DeleteAclsFilterResult:
    return DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=tuple(
        DeleteAclsMatchingAcl(error_code=ErrorCode.none, error_message=None,
                              resource_type=i8(b.resource_type), resource_name=b.name,
                              pattern_type=i8(b.pattern_type), principal=b.principal,
                              host=b.host, operation=i8(b.operation),
                              permission_type=i8(b.permission))
        for b in removed or ()))


async def handle(ctx: RequestContext) -> DeleteAclsResponse:
    ctx.hold()  # in order: applied once stored
    filters = ctx.body.filters
    if not access.cluster_allowed(ctx, AclOperation.ALTER):
        return DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(
            _result(ErrorCode.cluster_authorization_failed,
                    access.DENIED_MESSAGES[ErrorCode.cluster_authorization_failed])
            for _ in filters))
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(
            _result(ErrorCode.security_disabled, NO_AUTHORIZER) for _ in filters))
    parsed: list[AclBindingFilter | str] = []
    for f in filters:
        flt = filter_of(f)
        try:
            flt.validate()
            parsed.append(flt)
        except InvalidAcl as exc:
            parsed.append(str(exc))
    valid = [p for p in parsed if isinstance(p, AclBindingFilter)]
    removed = iter(await authorizer.delete(valid))
    return DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(
        _result(ErrorCode.invalid_request, p) if isinstance(p, str)
        else _result(ErrorCode.none, None, next(removed)) for p in parsed))
