"""ShareFetch (key 78, v1-v2): a share group member's fetch (KIP-932).

One request: the share session step (epoch 0 opens, replacing the member's session if it
has one, and may carry no acknowledgements; -1 closes; otherwise the next epoch;
:mod:`samsa.broker.shares`), the piggybacked acknowledgements of each partition (answered
in ``acknowledge_error_code``), then records: per session partition, the log is read from
the share partition's first available offset and what can be acquired is acquired for the
member (up to ``max_records`` in all), the answer carrying the batches that hold the
acquired offsets and the acquired ranges with their delivery counts. With nothing acquired
and no acknowledgement to answer, the request waits up to ``max_wait`` for new records or
records made available again. A closing request (epoch -1) fetches nothing. The answer
waits until the acknowledgements' state write is durable; records are acquired first, so
that write (coalesced with the other changes of the loop pass) holds the whole request.

v1 and v2's ``share_acquire_mode`` BATCH_OPTIMIZED (KIP-1206, Kafka 4.2's default) acquire
up to the end of the log batch that reaches ``max_records`` or the window's room
(``group.share.partition.max.record.locks``: as Kafka, the window may pass it by less than
a batch, so a batch the answer carries is never sent again for its rest); RECORD_LIMIT
never more than ``max_records``. v2's ``is_renew_ack`` (KIP-1222): acknowledgements only, no fetch.
Needs READ on the group (else a top-level GROUP_AUTHORIZATION_FAILED) and READ on each
topic (else its partitions are TOPIC_AUTHORIZATION_FAILED). Built as v2, typed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v2 import response as wire
from kio.static.primitive import Records, i16, i32, i64

from samsa.broker import access, leadership
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.handlers.share_acknowledge import (
    Acks,
    ack_batches,
    apply,
    leader_of,
    lock_timeout,
    refused,
    settle,
)
from samsa.broker.parking import park
from samsa.broker.shares import Mark, SessionError, ShareSession
from samsa.log.producer_state import AbortedTxn
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.batch import parse_header
from samsa.protocol.build import NO_THROTTLE, millis
from samsa.security.acl import AclOperation, ResourceType
from samsa.share import Acquired

API_KEY = ApiKey.SHARE_FETCH
VERSIONS = (1, 2)

#: bytes read per partition at most (Kafka's max.partition.fetch.bytes default)
PARTITION_BYTES = 1 << 20


def _error(ctx: RequestContext, code: ErrorCode,
           message: str | None) -> wire.ShareFetchResponse:
    return wire.ShareFetchResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message,
        acquisition_lock_timeout=lock_timeout(ctx), responses=(), node_endpoints=())


async def handle(ctx: RequestContext) -> wire.ShareFetchResponse:
    body = ctx.body
    group_id, member_id = body.group_id or "", body.member_id or ""
    epoch = int(body.share_session_epoch)
    refusal = refused(ctx)
    if refusal is not None:
        return _error(ctx, *refusal)
    wanted = [(t.topic_id, int(p.partition_index)) for t in body.topics for p in t.partitions]
    if epoch == -1 and wanted:
        return _error(ctx, ErrorCode.invalid_request,
                      "A request closing the share session cannot fetch.")
    if epoch == 0 and any(p.acknowledgement_batches for t in body.topics
                          for p in t.partitions):
        return _error(ctx, ErrorCode.invalid_request,
                      "A request opening a share session cannot acknowledge.")
    shares = ctx.broker.shares
    try:
        session = shares.session(group_id, member_id, epoch, ctx.connection, opening=True)
    except SessionError as exc:
        return _error(ctx, exc.code, str(exc))
    for t in body.forgotten_topics_data:
        for p in t.partitions:
            session.partitions.pop((t.topic_id, int(p)), None)
    for tp in wanted:
        session.partitions[tp] = None
    acks: Acks = {}
    for t in body.topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                acks[(t.topic_id, int(p.partition_index))] = ack_batches(p.acknowledgement_batches)
    ack_errors, marks = apply(ctx, group_id, member_id, acks)
    if epoch == -1:
        await settle(ctx, ack_errors, marks)
        shares.close_session(session)
        return _answer(ctx, {tp: _Part(ack_error=e) for tp, e in ack_errors.items()})
    fetched: dict[tuple[uuid.UUID | None, int], _Part] = {}
    if not getattr(body, "is_renew_ack", False):
        # KIP-1206: v1 and v2's BATCH_OPTIMIZED (0) acquire whole batches, RECORD_LIMIT (1)
        # never more than max_records
        whole = int(getattr(body, "share_acquire_mode", 0)) == 0
        fetched = await _fetch_waiting(ctx, session, int(body.max_records), whole,
                                       int(body.max_bytes), millis(body.max_wait),
                                       wait=not ack_errors)
    await settle(ctx, ack_errors, marks)  # after the fetch: one state write covers both
    for tp, e in ack_errors.items():
        fetched.setdefault(tp, _Part()).ack_error = e
    for tp, part in list(fetched.items()):  # a cluster: the acquisitions saved first
        try:
            await shares.durable([part.saved])
        except OSError:  # the lease moved meanwhile: the new leader has these records
            fetched[tp] = _Part(ErrorCode.not_leader_or_follower, part.ack_error)
    return _answer(ctx, fetched)


class _Part:
    __slots__ = ("ack_error", "acquired", "error", "records", "saved")

    def __init__(self, error: ErrorCode = ErrorCode.none,
                 ack_error: ErrorCode = ErrorCode.none) -> None:
        self.error = error
        self.ack_error = ack_error
        self.records: bytes = b""
        self.acquired: tuple[Acquired, ...] = ()
        #: a cluster's save of the acquisition, awaited before the answer
        self.saved: Mark = None


async def _fetch_waiting(ctx: RequestContext, session: ShareSession, max_records: int,
                         whole: bool,
                         max_bytes: int, wait_ms: int,
                         wait: bool) -> dict[tuple[uuid.UUID | None, int], _Part]:
    await _find_starts(ctx, session)
    got = _fetch(ctx, session, max_records, whole, max_bytes)
    if not wait or wait_ms <= 0 or any(p.acquired or p.error for p in got.values()):
        return got
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    shares = ctx.broker.shares
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return got
        fut = shares.waiter()
        parts = _served(ctx, session)
        for part in parts:
            part.waiters.add(fut)
        try:
            await park(fut, remaining)
        finally:
            shares.forget(fut)
            for part in parts:
                part.waiters.discard(fut)
        if shares.sessions.get((session.group_id, session.member_id)) is not session:
            return {}  # closed meanwhile (epoch -1, or replaced at epoch 0)
        got = _fetch(ctx, session, max_records, whole, max_bytes)
        if any(p.acquired or p.error for p in got.values()):
            return got


async def _find_starts(ctx: RequestContext, session: ShareSession) -> None:
    """The ``by_duration`` starts of the session's share partitions not created yet, looked
    up without holding up the event loop before :func:`_fetch` creates them."""
    topics, shares = ctx.broker.topics, ctx.broker.shares
    for topic_id, index in list(session.partitions):
        topic = topics.by_id(topic_id) if topic_id is not None else None
        part = None if topic is None else topics.partition(topic.name, index)
        if part is not None and shares.serves(topic_id, index):
            await shares.find_start(session.group_id, topic_id, part)


def _served(ctx: RequestContext, session: ShareSession) -> list[Any]:
    topics = ctx.broker.topics
    out = []
    for topic_id, index in session.partitions:
        topic = topics.by_id(topic_id) if topic_id is not None else None
        part = None if topic is None else topics.partition(topic.name, index)
        if part is not None:
            out.append(part)
    return out


def _fetch(ctx: RequestContext, session: ShareSession, max_records: int, whole: bool,
           max_bytes: int) -> dict[tuple[uuid.UUID | None, int], _Part]:
    """Acquire records of the session's partitions for the member, in session order; with
    ``whole``, up to the end of the log batch that reaches ``max_records`` (KIP-1206's
    batch-optimized mode: ``max_records`` is a soft limit)."""
    topics = ctx.broker.topics
    readable = access.checker(ctx, AclOperation.READ, ResourceType.TOPIC)
    out: dict[tuple[uuid.UUID | None, int], _Part] = {}
    budget_records, budget_bytes = max_records, max_bytes
    now = now_ms()
    for topic_id, index in list(session.partitions):
        topic = topics.by_id(topic_id) if topic_id is not None else None
        if topic is None:
            out[(topic_id, index)] = _Part(ErrorCode.unknown_topic_id)
            continue
        if not readable(topic.name):
            out[(topic_id, index)] = _Part(ErrorCode.topic_authorization_failed)
            continue
        part = topics.partition(topic.name, index)
        if part is None:
            out[(topic_id, index)] = _Part(ErrorCode.unknown_topic_or_partition)
            continue
        error = leadership.leader_error(ctx.broker, part)
        if error == ErrorCode.none and not ctx.broker.shares.serves(topic.topic_id, index):
            error = ErrorCode.not_leader_or_follower  # a cluster node loading or dropping it
        if error != ErrorCode.none:
            out[(topic_id, index)] = _Part(error)
            continue
        if budget_records <= 0 or budget_bytes <= 0:
            continue
        shares = ctx.broker.shares
        share = shares.partition(session.group_id, topic.topic_id, part)
        log = part.log
        if log.log_start_offset > share.start_offset:  # retention deleted records
            shares.changed(share, share.skip_to(log.log_start_offset))
        committed = shares.read_committed(session.group_id)
        acquired: tuple[Acquired, ...] = ()
        while not acquired:
            start = share.next_fetch_offset()
            end = log.log_end_offset
            if committed:
                end = log.producers.last_stable_offset(end)
            if start >= end:
                break
            # enough whole batches to acquire the budget past SPEO (fewer bytes to copy)
            enough = max(start, share.end_offset) + budget_records
            data, ends = _batches(log.read(start, min(PARTITION_BYTES, budget_bytes)),
                                  enough, end)
            upto = ends[-1] if ends else 0
            if not data:
                break
            archived = None
            if committed:  # records of aborted transactions are archived, never sent
                aborted = _aborted(data, log.producers.aborted_between(start, upto))
                if aborted:
                    archived = share.archive(aborted)
                    shares.changed(share, archived)
                    data = _without(data, {first for first, _ in aborted})
            # batch-optimized: whole batches, also where the window cuts one (as Kafka)
            acquired = share.acquire(session.member_id, upto,
                                     budget_records + (max(0, upto - enough) if whole else 0),
                                     now, ends if whole else ())
            if not acquired and archived is None:
                break  # (after archiving, read on: what follows may be acquired)
        if not acquired:
            continue
        data = _trim(data, acquired[-1].last_offset)
        got = _Part()
        got.records, got.acquired = data, acquired
        got.saved = ctx.broker.shares.acquired(share)
        shares.counters.observe_acquired(acquired)
        out[(topic_id, index)] = got
        budget_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
        budget_bytes -= len(data)
    _rotate(session, out)
    return out


def _batches(data: bytes | memoryview, enough: int, end: int) -> tuple[bytes, list[int]]:
    """The whole batches of ``data`` that start below ``end`` (the log end, or the last
    stable offset), up to the first that reaches offset ``enough``, and the offset after
    each of them."""
    view = memoryview(data)
    pos = 0
    ends: list[int] = []
    while pos + 61 <= len(view):
        header = parse_header(view, pos)
        if header.end > len(view) or header.base_offset >= end:
            break
        pos = header.end
        ends.append(header.next_offset)
        if header.next_offset >= enough:
            break
    return bytes(view[:pos]), ends


def _aborted(data: bytes, aborted: list[AbortedTxn]) -> list[tuple[int, int]]:
    """The (first, last) offsets of the batches of ``data`` that belong to the
    ``aborted`` transactions (their producer's records from the transaction's first offset
    to its abort marker)."""
    if not aborted:
        return []
    out = []
    pos = 0
    while pos + 61 <= len(data):
        header = parse_header(data, pos)
        pos = header.end
        if header.is_transactional and not header.is_control and any(
                a.producer_id == header.producer_id
                and a.first_offset <= header.base_offset < a.last_offset for a in aborted):
            out.append((header.base_offset, header.last_offset))
    return out


def _without(data: bytes, firsts: set[int]) -> bytes:
    """``data`` without the batches starting at ``firsts``."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        header = parse_header(data, pos)
        if header.base_offset not in firsts:
            out.append(data[pos:header.end])
        pos = header.end
    return b"".join(out)


def _trim(data: bytes, last_offset: int) -> bytes:
    """``data`` up to the batch holding ``last_offset``."""
    pos = 0
    while pos + 61 <= len(data):
        header = parse_header(data, pos)
        pos = header.end
        if header.last_offset >= last_offset:
            break
    return data[:pos]


def _rotate(session: ShareSession, got: dict[tuple[uuid.UUID | None, int], _Part]) -> None:
    """Partitions that gave records go to the back of the session's order (fairness)."""
    for tp, part in got.items():
        if part.acquired and tp in session.partitions:
            session.partitions.pop(tp)
            session.partitions[tp] = None


def _answer(ctx: RequestContext,
            parts: dict[tuple[uuid.UUID | None, int], _Part]) -> wire.ShareFetchResponse:
    by_topic: dict[uuid.UUID | None, list[wire.PartitionData]] = {}
    for (topic_id, index), p in parts.items():
        leader_id, leader_epoch = leader_of(ctx, topic_id, index)
        by_topic.setdefault(topic_id, []).append(wire.PartitionData(
            partition_index=i32(index), error_code=p.error,
            acknowledge_error_code=i16(p.ack_error),
            current_leader=wire.LeaderIdAndEpoch(leader_id=i32(leader_id),
                                                 leader_epoch=i32(leader_epoch)),
            records=Records(p.records),
            acquired_records=tuple(
                wire.AcquiredRecords(first_offset=i64(a.first_offset),
                                     last_offset=i64(a.last_offset),
                                     delivery_count=i16(a.delivery_count))
                for a in p.acquired)))
    return wire.ShareFetchResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        acquisition_lock_timeout=lock_timeout(ctx),
        responses=tuple(wire.ShareFetchableTopicResponse(topic_id=t, partitions=tuple(ps))
                        for t, ps in by_topic.items()),
        node_endpoints=())
