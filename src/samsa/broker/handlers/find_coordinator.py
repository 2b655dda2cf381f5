"""FindCoordinator (key 10): the node owning the group's ``__consumer_offsets`` shard."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker.context import RequestContext

API_KEY = 10
VERSIONS = (0, 4)

GROUP, TRANSACTION = 0, 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    config = ctx.broker.config
    out: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1,
                           "error_code": ErrorCode.none, "error_message": None}
    if key_type == TRANSACTION:
        out.update(error_code=ErrorCode.invalid_request,
                   error_message="samsa does not support transactions")
        return out
    if key_type != GROUP:
        out.update(error_code=ErrorCode.invalid_request,
                   error_message=f"unsupported coordinator key type {key_type}")
        return out
    code = ctx.broker.groups.coordinator_error(key)
    if code:
        out["error_code"] = ErrorCode(code)
        return out
    out.update(node_id=config.node_id, host=config.advertised_host, port=config.advertised_port)
    return out


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    key_type = getattr(body, "key_type", GROUP)
    if ctx.version >= 4:
        found = [_lookup(ctx, key, key_type) for key in body.coordinator_keys]
        return ctx.respond(throttle_time=0, coordinators=found)
    single = _lookup(ctx, body.key, key_type)
    del single["key"]
    return ctx.respond(throttle_time=0, **single)
