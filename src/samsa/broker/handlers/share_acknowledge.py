"""ShareAcknowledge (key 79, v1-v2): a share group member acknowledges records it acquired
(KIP-932): per offset range one type for all, or one per offset — 0 GAP, 1 ACCEPT,
2 RELEASE, 3 REJECT, 4 RENEW (KIP-1222, v2; INVALID_RECORD_STATE for the partition when the
group's ``share.renew.acknowledge.enable`` is false, as Kafka). All or nothing per partition:
an offset the member does not hold makes the partition INVALID_RECORD_STATE.

The share session must exist and the request carry its next epoch (epoch 0 is
INVALID_SHARE_SESSION_EPOCH: only ShareFetch opens sessions); epoch -1 closes it after the
acknowledgements, releasing what the member still holds. Needs READ on the group (else a
top-level GROUP_AUTHORIZATION_FAILED) and READ on each topic. Built as v2, typed.

The helpers here (:func:`ack_batches`, :func:`apply`, :func:`leader_of`) also serve
ShareFetch's piggybacked acknowledgements.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v2 import response as wire
from kio.static.primitive import i32, i32Timedelta

from samsa.broker import access, leadership
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.shares import Mark, SessionError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
VERSIONS = (1, 2)

#: (first offset, last offset, acknowledge types) per batch
Batches = list[tuple[int, int, tuple[int, ...]]]
Acks = dict[tuple[uuid.UUID | None, int], Batches]


def ack_batches(batches: Any) -> Batches:
    return [(int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types))
            for b in batches]


async def acknowledge(ctx: RequestContext, group_id: str, member_id: str,
                      acks: Acks) -> dict[tuple[uuid.UUID | None, int], ErrorCode]:
    """Apply each partition's acknowledgements; its error code (NONE when applied). Returns
    once the share partitions' new states are durable."""
    out, marks = apply(ctx, group_id, member_id, acks)
    await settle(ctx, out, marks)
    return out


def apply(ctx: RequestContext, group_id: str, member_id: str,
          acks: Acks) -> tuple[dict[tuple[uuid.UUID | None, int], ErrorCode],
                               list[tuple[tuple[uuid.UUID | None, int], Mark]]]:
    """Apply each partition's acknowledgements (in memory: what they release is available
    at once); their error codes and the state writes to await before answering them."""
    topics = ctx.broker.topics
    shares = ctx.broker.shares
    readable = access.checker(ctx, AclOperation.READ, ResourceType.TOPIC)
    out: dict[tuple[uuid.UUID | None, int], ErrorCode] = {}
    marks: list[tuple[tuple[uuid.UUID | None, int], Mark]] = []
    now = now_ms()
    for (topic_id, index), batches in acks.items():
        topic = topics.by_id(topic_id) if topic_id is not None else None
        if topic is None:
            out[(topic_id, index)] = ErrorCode.unknown_topic_id
            continue
        if not readable(topic.name):
            out[(topic_id, index)] = ErrorCode.topic_authorization_failed
            continue
        part = topics.partition(topic.name, index)
        if part is None:
            out[(topic_id, index)] = ErrorCode.unknown_topic_or_partition
            continue
        error = leadership.leader_error(ctx.broker, part)
        if error == ErrorCode.none and not shares.serves(topic.topic_id, index):
            error = ErrorCode.not_leader_or_follower  # a cluster node loading or dropping it
        share = shares.existing(group_id, topic.topic_id, index)
        if error == ErrorCode.none and share is None:
            error = ErrorCode.invalid_record_state
        if error != ErrorCode.none or share is None:
            out[(topic_id, index)] = error
            continue
        if not shares.renew_enabled(group_id) and any(4 in types for _, _, types in batches):
            out[(topic_id, index)] = ErrorCode.invalid_record_state  # RENEW is off (KIP-1222)
            continue
        code, update = share.acknowledge(member_id, batches, now)
        marks.append(((topic_id, index), shares.changed(share, update)))
        out[(topic_id, index)] = ErrorCode(code)
    return out, marks


async def settle(ctx: RequestContext, out: dict[tuple[uuid.UUID | None, int], ErrorCode],
                 marks: list[tuple[tuple[uuid.UUID | None, int], Mark]]) -> None:
    """Wait for the state writes of :func:`apply`; a partition whose write failed (a
    cluster's lease moved: the new leader redelivers its records) gets the error."""
    for tp, mark in marks:
        try:
            await ctx.broker.shares.durable([mark])
        except OSError as exc:
            out[tp] = getattr(exc, "error_code", ErrorCode.kafka_storage_error)


def refused(ctx: RequestContext) -> tuple[ErrorCode, str | None] | None:
    """The checks before the share session: a group and a member id, READ on the group."""
    body = ctx.body
    if not body.group_id or not body.member_id:
        return ErrorCode.invalid_request, "GroupId and MemberId are required."
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return ErrorCode.group_authorization_failed, None
    return None


def leader_of(ctx: RequestContext, topic_id: uuid.UUID | None, index: int) -> tuple[int, int]:
    topics = ctx.broker.topics
    topic = topics.by_id(topic_id) if topic_id is not None else None
    part = None if topic is None else topics.partition(topic.name, index)
    return (-1, -1) if part is None else leadership.leader(ctx.broker, part)


async def handle(ctx: RequestContext) -> wire.ShareAcknowledgeResponse:
    body = ctx.body
    group_id, member_id = body.group_id or "", body.member_id or ""
    epoch = int(body.share_session_epoch)
    refusal = refused(ctx)
    if refusal is not None:
        return _error(ctx, *refusal)
    shares = ctx.broker.shares
    try:
        session = shares.session(group_id, member_id, epoch, ctx.connection, opening=False)
    except SessionError as exc:
        return _error(ctx, exc.code, str(exc))
    acks: Acks = {(t.topic_id, int(p.partition_index)): ack_batches(p.acknowledgement_batches)
                  for t in body.topics for p in t.partitions}
    errors = await acknowledge(ctx, group_id, member_id, acks)
    if epoch == -1:
        shares.close_session(session)
    by_topic: dict[uuid.UUID | None, list[wire.PartitionData]] = {}
    for (topic_id, index), code in errors.items():
        leader_id, leader_epoch = leader_of(ctx, topic_id, index)
        by_topic.setdefault(topic_id, []).append(wire.PartitionData(
            partition_index=i32(index), error_code=code,
            current_leader=wire.LeaderIdAndEpoch(leader_id=i32(leader_id),
                                                 leader_epoch=i32(leader_epoch))))
    return wire.ShareAcknowledgeResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        acquisition_lock_timeout=lock_timeout(ctx),
        responses=tuple(wire.ShareAcknowledgeTopicResponse(topic_id=t, partitions=tuple(ps))
                        for t, ps in by_topic.items()),
        node_endpoints=())


def lock_timeout(ctx: RequestContext) -> i32Timedelta:
    ms = ctx.broker.shares.partition_config(ctx.body.group_id or "").record_lock_duration_ms
    return i32Timedelta.parse(timedelta(milliseconds=ms))


def _error(ctx: RequestContext, code: ErrorCode,
           message: str | None) -> wire.ShareAcknowledgeResponse:
    return wire.ShareAcknowledgeResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message,
        acquisition_lock_timeout=lock_timeout(ctx), responses=(), node_endpoints=())
