"""Fetch (key 1): long poll with min/max bytes, whole batches.

Fetch sessions (KIP-227) are declined by answering session id 0, so clients send full
fetch requests; that is allowed by the protocol and keeps the broker stateless here.
Versions (v4-13 served): v4 isolation_level (read_committed: records up to the last stable
offset only, whole batches, and the aborted transactions among them), last_stable_offset;
v5 log_start_offset; v7 fetch sessions (declined); v9 current_leader_epoch
(checked against a cluster node's lease: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH; a single
node is at epoch 0); v11 rack_id, preferred_read_replica (-1); v12 flexible, diverging epochs
(never sent), current_leader on NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH (Kafka fills
it from v16 on, with node endpoints v12-13 lack; the field is there from v12 and harmless);
v13 topics by topic id (UNKNOWN_TOPIC_ID), not by name.
Needs READ on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED; a topic id
this broker does not know is UNKNOWN_TOPIC_ID first).
Untyped on purpose: the answer splices stored record bytes into the encoded frame.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.broker.parking import park
from samsa.broker.partition import Partition
from samsa.log import OffsetOutOfRange
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.batch import BATCH_OVERHEAD, parse_header
from samsa.protocol.build import millis
from samsa.protocol.codec import Spliced, placeholder
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.FETCH
VERSIONS = (4, 13)
READ_COMMITTED = 1


@dataclass(slots=True)
class _Want:
    topic_key: Any  # name (v<13) or topic id
    partition: int
    fetch_offset: int
    max_bytes: int
    part: Partition | None
    error: ErrorCode
    leader: tuple[int, int] | None = None
    """(leader id, epoch) for the answer's current_leader, on a leadership error only."""


_POINTS_TO_LEADER = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)
def _wants(ctx: RequestContext, readable: Callable[[str], bool]) -> list[_Want]:
    topics = ctx.broker.topics
    out = []
    for t in ctx.body.topics:
        if ctx.version >= 13:
            topic = topics.by_id(t.topic_id)
            key: Any = t.topic_id
            missing = ErrorCode.unknown_topic_id
        else:
            topic = topics.get(t.topic)
            key = t.topic
            missing = ErrorCode.unknown_topic_or_partition
        name = topic.name if topic is not None else None if ctx.version >= 13 else t.topic
        if name is not None and not readable(name):
            missing, topic = ErrorCode.topic_authorization_failed, None
        for p in t.partitions:
            part = None
            error = missing
            leader = None
            if topic is not None:
                part = topics.partition(topic.name, p.partition)
                error = ErrorCode.none if part else ErrorCode.unknown_topic_or_partition
                if part is not None:  # a cluster node that does not lead it: NOT_LEADER...
                    error = leadership.leader_error(
                        ctx.broker, part, getattr(p, "current_leader_epoch", -1))
                    if error != ErrorCode.none:
                        if ctx.version >= 12 and error in _POINTS_TO_LEADER:
                            leader = leadership.leader(ctx.broker, part)
                        part = None
            out.append(_Want(key, p.partition, p.fetch_offset, p.partition_max_bytes, part,
                             error, leader))
    return out


def _below(data: bytes | memoryview, lso: int) -> tuple[bytes | memoryview, int]:
    """The whole batches of ``data`` that start below ``lso``, and the offset after them."""
    pos, end = 0, -1
    while pos + BATCH_OVERHEAD <= len(data):
        header = parse_header(data, pos)
        if header.base_offset >= lso:
            break
        pos, end = header.end, header.next_offset
    return (data[:pos] if pos < len(data) else data), end


def _read(wants: list[_Want], max_bytes: int,
          committed: bool = False) -> tuple[list[dict[str, Any]], int]:
    """Read every wanted partition within the limits; returns (partition results, bytes).
    ``committed`` (read_committed): up to the last stable offset, with the aborted
    transactions among the records returned."""
    total = 0
    results = []
    for w in wants:
        entry: dict[str, Any] = {"partition_index": w.partition, "error_code": w.error,
                                 "high_watermark": -1, "last_stable_offset": -1,
                                 "log_start_offset": -1, "aborted_transactions": None,
                                 "preferred_read_replica": -1, "records": b""}
        if w.part is not None:
            log = w.part.log
            hw = log.log_end_offset
            lso = log.producers.last_stable_offset(hw) if committed else hw
            entry.update(high_watermark=hw, last_stable_offset=lso,
                         log_start_offset=log.log_start_offset)
            budget = min(w.max_bytes, max_bytes - total)
            data: bytes | memoryview
            try:
                if (total and budget <= 0) or lso <= w.fetch_offset <= hw:
                    data = b""
                else:
                    # The response's first batch is returned even if it exceeds the limits.
                    data = log.read(w.fetch_offset, budget if total else max(budget, 1))
                    if total and len(data) > budget:
                        data = b""
            except OffsetOutOfRange:
                entry["error_code"] = ErrorCode.offset_out_of_range
                data = b""
            if committed:
                data, upto = _below(data, lso) if lso < hw else (data, hw)
                entry["aborted_transactions"] = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in log.producers.aborted_between(w.fetch_offset, upto)] if data else []
            entry["records"] = data
            total += len(data)
        elif w.leader is not None:
            entry["current_leader"] = {"leader_id": w.leader[0], "leader_epoch": w.leader[1]}
        results.append(entry)
    return results, total


def _group(wants: list[_Want], results: list[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """Topic entries in request order, as Kafka answers: a new entry wherever the topic
    changes (librdkafka rotates its start partition, so a topic can come back later)."""
    key = "topic_id" if version >= 13 else "topic"
    out: list[dict[str, Any]] = []
    for w, r in zip(wants, results, strict=True):
        if not out or out[-1][key] != w.topic_key:
            out.append({key: w.topic_key, "partitions": []})
        out[-1]["partitions"].append(r)
    return out


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    readable = access.checker(ctx, AclOperation.READ, ResourceType.TOPIC)
    wants = _wants(ctx, readable)
    max_bytes = body.max_bytes
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    results, total = _read(wants, max_bytes, committed)
    wait_ms = millis(body.max_wait)
    if total < body.min_bytes and wait_ms > 0 and not _has_errors(results):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while total < body.min_bytes:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            fut: asyncio.Future[None] = loop.create_future()
            parts = [w.part for w in wants if w.part is not None]
            for part in parts:
                part.waiters.add(fut)
            try:
                await park(fut, remaining)
            finally:
                for part in parts:
                    part.waiters.discard(fut)
            wants = _wants(ctx, readable)
            results, total = _read(wants, max_bytes, committed)
    payloads = _take_payloads(results)
    response = ctx.respond(throttle_time=0, error_code=ErrorCode.none, session_id=0,
                           responses=_group(wants, results, ctx.version))
    return Spliced(response, payloads) if payloads else response


def _take_payloads(results: list[dict[str, Any]]) -> list[bytes | memoryview]:
    """Record bytes are spliced into the encoded response rather than copied through kio:
    each non-empty ``records`` becomes a placeholder naming its payload."""
    payloads: list[bytes | memoryview] = []
    for r in results:
        if r["records"]:
            payloads.append(r["records"])
            r["records"] = placeholder(len(payloads) - 1)
    return payloads


def _has_errors(results: list[dict[str, Any]]) -> bool:
    return any(r["error_code"] != ErrorCode.none for r in results)

