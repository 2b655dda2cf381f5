"""What a request may do: the handlers' one door to the authorizer (Kafka's ``AuthHelper``).

Every handler asks here, with its request context, whether the connection's principal may
do an operation on a resource (the console asks :func:`may` for its own principal); without
an authorizer (``authorizer.class.name`` unset) everything is allowed, as in Kafka. A
denial is logged (rate-limited) and counted in the metrics, except where a handler filters
results (``log=False``: Metadata of all topics, ListGroups), where being denied is the
expected case, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from samsa.broker import config_admin
from samsa.broker.config import BrokerConfig
from samsa.broker.metrics import API_NAMES
from samsa.coordinator import Event, error_response
from samsa.coordinator.responses import Response
from samsa.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    parse_super_users,
)
from samsa.security.authorizer import AclStore, Authorizer

if TYPE_CHECKING:
    from samsa.broker.context import RequestContext

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

NOT_REQUESTED = -(2**31)
"""The authorized-operations field of an answer that did not ask for them."""

NO_ADDRESS = "/unknown"
"""The client host of a connection without an address (the broker's in-process ones, the
console's): only ACLs for host ``*`` match it."""


def authorizer_for(config: BrokerConfig, store: AclStore) -> Authorizer | None:
    """The broker's authorizer over the engine's ACL ``store`` (the data directory, or the
    cluster's database), or None when ``authorizer.class.name`` is unset."""
    if not config["authorizer.class.name"]:
        return None
    return Authorizer(store, parse_super_users(config["super.users"]),
                      bool(config["allow.everyone.if.no.acl.found"]))


def may(authorizer: Authorizer | None, principal: str, host: str, op: AclOperation,
        rtype: ResourceType, name: str) -> bool:
    """May ``principal`` connected from ``host`` do ``op`` on resource ``name``? (Always,
    without an authorizer.) For callers without a request: the console's views."""
    return authorizer is None or authorizer.authorize(principal, host, op, rtype, name)


def allowed(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str, *,
            log: bool = True) -> bool:
    """May the request's principal do ``op`` on resource ``name``?"""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    if may(authorizer, str(ctx.principal), ctx.client_host, op, rtype, name):
        return True
    if log:
        denied(ctx, op, rtype, name)
    return False


def denied(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> None:
    """Count and log (rate-limited) a denial."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return
    api = ctx.request.api_key
    ctx.broker.metrics.observe_denied(api, rtype, op)
    authorizer.denials.denied(str(ctx.principal), ctx.client_host, op, rtype, name,
                              API_NAMES.get(api, str(api)))


def cluster_allowed(ctx: RequestContext, op: AclOperation, *, log: bool = True) -> bool:
    """May the request's principal do ``op`` on the cluster?"""
    return allowed(ctx, op, CLUSTER, CLUSTER_NAME, log=log)


def allowed_names(ctx: RequestContext, op: AclOperation, rtype: ResourceType,
                  names: Iterable[str], *, log: bool = True) -> set[str]:
    """The names among ``names`` the principal may do ``op`` on (Kafka's
    ``filterByAuthorized``)."""
    if ctx.broker.authorizer is None:
        return set(names)
    return {n for n in set(names) if allowed(ctx, op, rtype, n, log=log)}


def _always(name: str) -> bool:
    return True


def checker(ctx: RequestContext, op: AclOperation, rtype: ResourceType
            ) -> Callable[[str], bool]:
    """``allowed(ctx, op, rtype, name)`` as a function of the name, each name decided once
    (a request asked again and again, as a long-polling Fetch)."""
    if ctx.broker.authorizer is None:
        return _always
    return cache(lambda name: allowed(ctx, op, rtype, name))


def allowed_any(ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
    """May the principal do ``op`` on some resource of the type (Kafka's
    ``authorizeByResourceType``)?"""
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize_any(str(ctx.principal), ctx.client_host,
                                                          op, rtype)


def operations(ctx: RequestContext, rtype: ResourceType, name: str) -> int:
    """The 32-bit field of the operations the principal may do on the resource (every
    operation of the type without an authorizer, as in Kafka)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            bits |= 1 << int(op)
        return bits
    return authorizer.operations(str(ctx.principal), ctx.client_host, rtype, name)


DENIED_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}
"""Kafka's messages of the authorization errors."""

_CONFIG_RESOURCES = {
    config_admin.TOPIC: (TOPIC, ErrorCode.topic_authorization_failed),
    config_admin.GROUP: (GROUP, ErrorCode.group_authorization_failed),
    config_admin.BROKER: (CLUSTER, ErrorCode.cluster_authorization_failed),
}


def config_refusal(ctx: RequestContext, op: AclOperation, config_type: int,
                   name: str) -> tuple[ErrorCode, str] | None:
    """None if the principal may ``op`` (DESCRIBE_CONFIGS, ALTER_CONFIGS) a config resource
    (a topic or group by its name, a broker through the cluster); else Kafka's error and
    message. Resource types not served are left to the handler."""
    found = _CONFIG_RESOURCES.get(config_type)
    if found is None:
        return None
    rtype, code = found
    if allowed(ctx, op, rtype, CLUSTER_NAME if rtype == CLUSTER else name):
        return None
    return code, DENIED_MESSAGES[code]


def config_refusals(ctx: RequestContext, op: AclOperation
                     ) -> Callable[[int, str], tuple[ErrorCode, str] | None]:
    """:func:`config_refusal` of this request and operation, per resource."""
    return partial(config_refusal, ctx, op)


async def call_group(ctx: RequestContext, event: Event, op: AclOperation) -> Response:
    """The coordinator's answer to ``event`` for the groups the principal may do ``op`` on;
    a group it may not is answered GROUP_AUTHORIZATION_FAILED without reaching the
    coordinator (in its place among the others, for a request of several groups)."""
    several: Any = event  # DescribeGroups, DeleteGroups, OffsetFetch, ConsumerGroupDescribe
    groups = getattr(several, "groups", None)
    if groups is None:
        if allowed(ctx, op, GROUP, several.group_id):
            return await ctx.broker.groups.call(event)
        return error_response(event, ErrorCode.group_authorization_failed)
    ok = [allowed(ctx, op, GROUP, g if isinstance(g, str) else g.group_id) for g in groups]
    if all(ok):
        return await ctx.broker.groups.call(event)
    granted = tuple(g for g, yes in zip(groups, ok, strict=True) if yes)
    refused = tuple(g for g, yes in zip(groups, ok, strict=True) if not yes)
    refusal: Any = error_response(replace(several, groups=refused),
                                  ErrorCode.group_authorization_failed)
    answer: Any = await ctx.broker.groups.call(replace(several, groups=granted)) if granted \
        else refusal
    answered, refusals = iter(answer.groups if granted else ()), iter(refusal.groups)
    merged: Response = replace(answer, groups=tuple(
        next(answered) if yes else next(refusals) for yes in ok))
    return merged
