"""DescribeUserScramCredentials (key 50, KIP-554): users' SCRAM mechanisms and iterations
(never a salt or key).

Versions: v0 only (flexible). Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(top level and for each user asked), as Kafka. Users null or empty: every user with a
credential. A named user without one: RESOURCE_NOT_FOUND; a user named twice:
DUPLICATE_RESOURCE, as Kafka. Built as v0, typed.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)

#: Kafka's ScramMechanism type codes
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def _result(user: str, code: ErrorCode = ErrorCode.none, message: str | None = None,
            infos: tuple[CredentialInfo, ...] = ()) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(user=user, error_code=code, error_message=message,
                                              credential_infos=infos)


async def handle(ctx: RequestContext) -> DescribeUserScramCredentialsResponse:
    if not access.cluster_allowed(ctx, AclOperation.DESCRIBE):
        code = ErrorCode.cluster_authorization_failed
        message = access.DENIED_MESSAGES[code]
        return DescribeUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE, error_code=code, error_message=message,
            results=tuple(_result(u.name, code, message) for u in ctx.body.users or ()))
    known = ctx.broker.credentials.users()
    asked = [u.name for u in ctx.body.users or ()] or sorted(known)
    counts = Counter(asked)
    results = []
    for user in dict.fromkeys(asked):
        if counts[user] > 1:
            results.append(_result(user, ErrorCode.duplicate_resource,
                                   f"Cannot describe SCRAM credentials for the same user twice "
                                   f"in a single request: {user}"))
        elif user not in known:
            results.append(_result(user, ErrorCode.resource_not_found,
                                   f"Attempt to describe a user credential that does not "
                                   f"exist: {user}"))
        else:
            results.append(_result(user, infos=tuple(
                CredentialInfo(mechanism=i8(MECHANISM_CODES[m]), iterations=i32(n))
                for m, n in known[user].items())))
    return DescribeUserScramCredentialsResponse(throttle_time=NO_THROTTLE,
                                                error_code=ErrorCode.none, error_message=None,
                                                results=tuple(results))
