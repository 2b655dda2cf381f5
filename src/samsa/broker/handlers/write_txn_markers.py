"""WriteTxnMarkers (key 27): write commit or abort markers for producers' transactions.

Kafka's transaction coordinators send it to partition leaders; samsa's coordinator writes
its own markers in-process, so here it serves KIP-664: ``Admin.abortTransaction`` and
``samsa transactions abort`` close a hanging transaction (a partition's open transaction
its coordinator does not know) with an abort marker at the producer's epoch, and the last
stable offset moves past it. A marker to ``__consumer_offsets`` also commits or drops the
producer's offsets staged there.

Needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition),
as Kafka. Per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER on a cluster
node that does not lead it, INVALID_PRODUCER_EPOCH for a marker older than the producer's
current epoch there (the transaction belongs to a newer instance). Answered once the
markers are durable. Versions (v1-2 served; v0 was removed in Kafka 4.0): v1 flexible; v2
``transaction_version`` per marker (the epoch check is the same here). samsa's markers
carry the coordinator shard's lease epoch, but the producer state keeps none, so
TRANSACTION_COORDINATOR_FENCED is never answered. Built as v2, typed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v2 import response as v2
from kio.static.primitive import i32

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.broker.topics import OFFSETS_TOPIC
from samsa.broker.transactions import append_marker
from samsa.log import LogError
from samsa.protocol.api_keys import ApiKey
from samsa.security.acl import AclOperation

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = (1, 2)


def _write(ctx: RequestContext, topic: str, index: int, marker: Any) -> ErrorCode | int:
    """Append one marker: its error, or the offset after it (to wait for durability)."""
    pid, epoch = int(marker.producer_id), int(marker.producer_epoch)
    commit = bool(marker.transaction_result)
    part = ctx.broker.topics.partition(topic, index)
    if part is None:
        return ErrorCode.unknown_topic_or_partition
    code = leadership.leader_error(ctx.broker, part)
    if code != ErrorCode.none:
        return code
    entry = part.log.producers.get(pid)
    if entry is not None and epoch < entry.epoch:
        return ErrorCode.invalid_producer_epoch
    try:
        end = append_marker(part, commit, pid, epoch, int(marker.coordinator_epoch))
    except LogError as exc:
        return ErrorCode(exc.error_code)
    if topic == OFFSETS_TOPIC:
        ctx.broker.txn_offsets.marker_written(index, pid, epoch, commit)
    return end


async def _durable(ctx: RequestContext, topic: str, index: int, end: int) -> ErrorCode:
    part = ctx.broker.topics.partition(topic, index)
    try:
        if part is not None:
            await part.log.wait_durable(end)
    except (OSError, LogError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


async def handle(ctx: RequestContext) -> v2.WriteTxnMarkersResponse:
    allowed = access.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    written = [[[(_write(ctx, t.name, int(i), m) if allowed
                  else ErrorCode.cluster_authorization_failed) for i in t.partition_indexes]
                for t in m.topics] for m in ctx.body.markers]
    waits = {(a, b, c): _durable(ctx, t.name, int(t.partition_indexes[c]), r)
             for a, m in enumerate(ctx.body.markers) for b, t in enumerate(m.topics)
             for c, r in enumerate(written[a][b]) if not isinstance(r, ErrorCode)}
    codes = dict(zip(waits, await asyncio.gather(*waits.values()), strict=True))
    return v2.WriteTxnMarkersResponse(markers=tuple(
        v2.WritableTxnMarkerResult(producer_id=ProducerId(m.producer_id), topics=tuple(
            v2.WritableTxnMarkerTopicResult(name=TopicName(t.name), partitions=tuple(
                v2.WritableTxnMarkerPartitionResult(
                    partition_index=i32(index),
                    error_code=codes.get((a, b, c), written[a][b][c]))  # type: ignore[arg-type]
                for c, index in enumerate(t.partition_indexes)))
            for b, t in enumerate(m.topics)))
        for a, m in enumerate(ctx.body.markers)))
