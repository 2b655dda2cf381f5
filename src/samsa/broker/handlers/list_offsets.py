"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3) or by timestamp.

Needs DESCRIBE on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED).

Versions (v1-8 served): v2 isolation_level (read_committed, 1: LATEST is the last stable
offset, and a timestamp lookup finds only offsets below it, as Kafka's) and throttle_time;
v4 current_leader_epoch (checked as Fetch does: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
against a cluster node's lease) and each answer's leader_epoch (the lease's epoch; 0 on a
single node); v6 flexible;
v7 MAX_TIMESTAMP (-3), UNSUPPORTED_VERSION before; v8 EARLIEST_LOCAL (-4, KIP-405) is not
served: INVALID_REQUEST, as any other negative timestamp. The answer is built as v8, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v8.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.static.primitive import i32, i64

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (1, 8)

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_COMMITTED = 1
_UNKNOWN = i64(-1)
_NO_EPOCH = i32(-1)


def _answer(partition: i32, code: ErrorCode = ErrorCode.none, offset: i64 = _UNKNOWN,
            timestamp: i64 = _UNKNOWN, epoch: i32 = _NO_EPOCH) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(partition_index=partition, error_code=code,
                                        timestamp=timestamp, offset=offset, leader_epoch=epoch)


async def _lookup(ctx: RequestContext, topic: str, partition: i32, ts: int,
            current_leader_epoch: int, committed: bool) -> ListOffsetsPartitionResponse:
    part = ctx.broker.topics.partition(topic, partition)
    if part is None:
        return _answer(partition, ErrorCode.unknown_topic_or_partition)
    code = leadership.leader_error(ctx.broker, part, current_leader_epoch)
    if code != ErrorCode.none:
        return _answer(partition, code)
    epoch = i32(leadership.leader(ctx.broker, part)[1])
    log = part.log
    if ts == EARLIEST:
        return _answer(partition, offset=i64(log.log_start_offset), epoch=epoch)
    if ts == LATEST:
        end = log.log_end_offset
        if committed:
            end = log.producers.last_stable_offset(end)
        return _answer(partition, offset=i64(end), epoch=epoch)
    if ts == MAX_TIMESTAMP:
        if ctx.version < 7:
            return _answer(partition, ErrorCode.unsupported_version)
        found = await log.find_timestamp(None)
    elif ts < 0:
        return _answer(partition, ErrorCode.invalid_request)
    else:  # a shared engine reads its database: other requests are served meanwhile
        found = await log.find_timestamp(ts)
    if found is None or (committed and found[0] >= log.producers.last_stable_offset(
            log.log_end_offset)):
        return _answer(partition)  # read_committed looks below the last stable offset only
    return _answer(partition, offset=i64(found[0]), timestamp=i64(found[1]), epoch=epoch)


async def handle(ctx: RequestContext) -> ListOffsetsResponse:
    topics = []
    committed = getattr(ctx.body, "isolation_level", 0) == READ_COMMITTED
    describable = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       [t.name for t in ctx.body.topics])
    for t in ctx.body.topics:
        seen: set[int] = set()
        parts = []
        for p in t.partitions:
            if t.name not in describable:
                parts.append(_answer(p.partition_index, ErrorCode.topic_authorization_failed))
                continue
            if p.partition_index in seen:
                parts.append(_answer(p.partition_index, ErrorCode.invalid_request))
                continue
            seen.add(p.partition_index)
            parts.append(await _lookup(ctx, t.name, p.partition_index, p.timestamp,
                                       getattr(p, "current_leader_epoch", -1), committed))
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))
