"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3) or by timestamp.

Versions (v1-8 served): v2 isolation_level and throttle_time; v4 current_leader_epoch
(checked as Fetch does: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH against a cluster node's
lease) and each answer's leader_epoch (the lease's epoch; 0 on a single node); v6 flexible;
v7 MAX_TIMESTAMP (-3), UNSUPPORTED_VERSION before; v8 EARLIEST_LOCAL (-4, KIP-405) is not
served: INVALID_REQUEST, as any other negative timestamp.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker import leadership
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (1, 8)

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def _lookup(ctx: RequestContext, topic: str, partition: int, ts: int,
            current_leader_epoch: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": partition, "error_code": ErrorCode.none,
                           "timestamp": -1, "offset": -1, "leader_epoch": -1}
    part = ctx.broker.topics.partition(topic, partition)
    if part is None:
        out["error_code"] = ErrorCode.unknown_topic_or_partition
        return out
    code = leadership.leader_error(ctx.broker, part, current_leader_epoch)
    if code != ErrorCode.none:
        out["error_code"] = code
        return out
    _, epoch = leadership.leader(ctx.broker, part)
    log = part.log
    if ts == EARLIEST:
        out.update(offset=log.log_start_offset, leader_epoch=epoch)
    elif ts == LATEST:
        out.update(offset=log.log_end_offset, leader_epoch=epoch)
    elif ts == MAX_TIMESTAMP:
        found = log.max_timestamp_offset() if ctx.version >= 7 else None
        if ctx.version < 7:
            out["error_code"] = ErrorCode.unsupported_version
        elif found is not None:
            out.update(offset=found[0], timestamp=found[1], leader_epoch=epoch)
    elif ts < 0:
        out["error_code"] = ErrorCode.invalid_request
    else:
        hit = log.offset_for_timestamp(ts)
        if hit is not None:
            out.update(offset=hit[0], timestamp=hit[1], leader_epoch=epoch)
    return out


async def handle(ctx: RequestContext) -> Any:
    topics = []
    for t in ctx.body.topics:
        seen: set[int] = set()
        parts = []
        for p in t.partitions:
            if p.partition_index in seen:
                parts.append({"partition_index": p.partition_index,
                              "error_code": ErrorCode.invalid_request,
                              "timestamp": -1, "offset": -1, "leader_epoch": -1})
                continue
            seen.add(p.partition_index)
            parts.append(_lookup(ctx, t.name, p.partition_index, p.timestamp,
                                 getattr(p, "current_leader_epoch", -1)))
        topics.append({"name": t.name, "partitions": parts})
    return ctx.respond(throttle_time=0, topics=topics)
