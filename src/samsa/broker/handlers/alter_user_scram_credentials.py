"""AlterUserScramCredentials (key 51, KIP-554): add, change and delete SCRAM credentials.

Versions: v0 only (flexible). Needs ALTER on the cluster, else every user named is answered
CLUSTER_AUTHORIZATION_FAILED and nothing changes, as Kafka. An upsertion carries the salt and
the salted password (the client ran PBKDF2); the broker keeps only StoredKey and ServerKey.
Per user, as Kafka: an unknown mechanism UNSUPPORTED_SASL_MECHANISM; an empty name or
iterations outside [4096, 16384] UNACCEPTABLE_CREDENTIAL; the same user and mechanism twice
DUPLICATE_RESOURCE; deleting a credential that does not exist RESOURCE_NOT_FOUND. A user's
changes apply only if all of them are valid; they are persisted (data directory, or the
cluster's database where every node sees them within a second). Built as v0, typed.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.handlers.describe_user_scram_credentials import MECHANISM_CODES
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation
from samsa.security.credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    from_salted_password,
)

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)

_MECHANISMS = {code: name for name, code in MECHANISM_CODES.items()}

Error = tuple[ErrorCode, str]


def _check(ctx: RequestContext) -> dict[str, Error]:
    """user -> the first error among its changes."""
    body = ctx.body
    errors: dict[str, Error] = {}
    pairs = Counter((c.name, int(c.mechanism)) for c in (*body.deletions, *body.upsertions))
    known = ctx.broker.credentials.users()
    for change in (*body.deletions, *body.upsertions):
        user, mechanism = change.name, _MECHANISMS.get(int(change.mechanism))
        error: Error | None = None
        if not user:
            error = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mechanism is None:
            error = (ErrorCode.unsupported_sasl_mechanism,
                     f"Unknown SCRAM mechanism type {int(change.mechanism)}")
        elif pairs[(user, int(change.mechanism))] > 1:
            error = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice "
                                                   "in the same request")
        elif hasattr(change, "iterations") and not (
                MIN_ITERATIONS <= int(change.iterations) <= MAX_ITERATIONS):
            error = (ErrorCode.unacceptable_credential,
                     f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got "
                     f"{int(change.iterations)}")
        elif not hasattr(change, "iterations") and mechanism not in known.get(user, {}):
            error = (ErrorCode.resource_not_found, "Attempt to delete a user credential that "
                                                   "does not exist")
        if error is not None and user not in errors:
            errors[user] = error
    return errors


async def handle(ctx: RequestContext) -> AlterUserScramCredentialsResponse:
    ctx.hold()  # in order: applied once stored
    body = ctx.body
    users = dict.fromkeys(c.name for c in (*body.deletions, *body.upsertions))
    if not access.cluster_allowed(ctx, AclOperation.ALTER):
        code = ErrorCode.cluster_authorization_failed
        errors = dict.fromkeys(users, (code, access.DENIED_MESSAGES[code]))
    else:
        errors = _check(ctx)
    upserts: list[tuple[str, str, ScramCredential]] = []
    deletions: list[tuple[str, str]] = []
    for d in body.deletions:
        if d.name not in errors:
            deletions.append((d.name, _MECHANISMS[int(d.mechanism)]))
    for u in body.upsertions:
        if u.name not in errors:
            mechanism = _MECHANISMS[int(u.mechanism)]
            upserts.append((u.name, mechanism, from_salted_password(
                mechanism, bytes(u.salted_password), bytes(u.salt), int(u.iterations))))
    if upserts or deletions:
        await ctx.broker.credentials.alter(upserts, deletions)
    return AlterUserScramCredentialsResponse(throttle_time=NO_THROTTLE, results=tuple(
        AlterUserScramCredentialsResult(
            user=user, error_code=errors.get(user, (ErrorCode.none, ""))[0],
            error_message=errors[user][1] if user in errors else None)
        for user in users))
