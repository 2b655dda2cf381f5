"""TxnOffsetCommit (key 28): a transactional producer stages a group's offsets; they become
the group's committed offsets when its transaction commits
(:mod:`samsa.coordinator.txn_offsets`).

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on
the group (else GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED);
a partition this broker does not have gets UNKNOWN_TOPIC_OR_PARTITION without reaching the
coordinator.
Versions (v0-4 served): v2 committed_leader_epoch; v3 flexible, the group metadata
(generation or member epoch, member id, instance id: zombies are fenced by the group, KIP-447)
and PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v4 TRANSACTION_ABORTABLE; v5
transactions v2 (KIP-890): the group's ``__consumer_offsets`` partition joins the
transaction here (no AddOffsetsToTxn). Built as v4, typed.

Verification (KIP-890 part 1, ``transaction.partition.verification.enable``): before v0-4
(transactions v1) stage offsets, the group's ``__consumer_offsets`` partition must be in
the producer's open transaction (AddOffsetsToTxn put it there), as the transaction
coordinator says (:meth:`TxnRuntime.verify
<samsa.broker.transactions.TxnRuntime.verify>`), unless its transaction is open on that
partition already; else every partition gets INVALID_TXN_STATE (v4 TRANSACTION_ABORTABLE)
and nothing is staged. Unlike Produce, no guard covers a marker written between the answer
and the staging (Kafka's group coordinator takes one).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v4 import response as v4
from kio.schema.types import TopicName
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.topics import OFFSETS_TOPIC
from samsa.broker.transactions import fenced_code
from samsa.coordinator import CommitPartition, CommitTopic
from samsa.coordinator import responses as co
from samsa.coordinator.events import TxnOffsetCommit
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import AddPartitions

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = (0, 5)
TV2_VERSION = 5
FENCED_VERSION = 3
ABORTABLE_VERSION = 4
VERIFICATION = "transaction.partition.verification.enable"


async def handle(ctx: RequestContext) -> v4.TxnOffsetCommitResponse:
    ctx.hold()  # in order: committed after the implicit add
    body = ctx.body
    asked = [(t.name, int(p.partition_index)) for t in body.topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                          body.transactional_id):
        errors = dict.fromkeys(asked, ErrorCode.transactional_id_authorization_failed)
    elif not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        errors = dict.fromkeys(asked, ErrorCode.group_authorization_failed)
    else:
        readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                        [t.name for t in body.topics])
        known: list[CommitTopic] = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                if t.name not in readable:
                    errors[(t.name, p.partition_index)] = ErrorCode.topic_authorization_failed
                elif ctx.broker.topics.partition(t.name, p.partition_index) is None:
                    errors[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                else:
                    parts.append(CommitPartition(
                        p.partition_index, p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
            if parts:
                known.append(CommitTopic(t.name, tuple(parts)))
        added = ErrorCode.none
        if known and ctx.version >= TV2_VERSION:
            answer = await ctx.broker.transactions.add_implicitly(AddPartitions(
                body.transactional_id, body.producer_id, body.producer_epoch,
                ((OFFSETS_TOPIC, ctx.broker.groups.partition_for(body.group_id)),)))
            added = ErrorCode(answer.error_code)
        elif known and ctx.broker.topics.dynamic.effective[VERIFICATION]:
            added = await _verified(ctx)
        if added != ErrorCode.none:
            for t in known:
                for cp in t.partitions:
                    errors[(t.name, cp.partition)] = added
        if known and added == ErrorCode.none:
            resp = await ctx.broker.groups.call(TxnOffsetCommit(
                body.group_id, body.producer_id, body.producer_epoch, tuple(known),
                getattr(body, "generation_id", -1), getattr(body, "member_id", ""),
                getattr(body, "group_instance_id", None)))
            assert isinstance(resp, co.OffsetCommitResponse)
            for answered in resp.topics:
                for pe in answered.partitions:
                    errors[(answered.name, pe.partition)] = fenced_code(
                        pe.error_code, ctx.version, FENCED_VERSION)
    topics: dict[str, list[v4.TxnOffsetCommitResponsePartition]] = {}
    for name, index in asked:
        topics.setdefault(name, []).append(v4.TxnOffsetCommitResponsePartition(
            partition_index=i32(index), error_code=ErrorCode(errors[(name, index)])))
    return v4.TxnOffsetCommitResponse(throttle_time=NO_THROTTLE, topics=tuple(
        v4.TxnOffsetCommitResponseTopic(name=TopicName(name), partitions=tuple(parts))
        for name, parts in topics.items()))


async def _verified(ctx: RequestContext) -> ErrorCode:
    """Whether the group's ``__consumer_offsets`` partition is in the producer's open
    transaction (transactions v1): NONE, or the error to answer."""
    body = ctx.body
    where = (OFFSETS_TOPIC, ctx.broker.groups.partition_for(body.group_id))
    part = ctx.broker.topics.partition(*where)
    if part is not None and part.log.producers.in_transaction(body.producer_id,
                                                              body.producer_epoch):
        return ErrorCode.none
    answer = await ctx.broker.transactions.verify(AddPartitions(
        body.transactional_id, body.producer_id, body.producer_epoch, (where,),
        verify_only=True))
    if answer.error_code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch  # as Kafka's verification answers it
    if answer.error_code != ErrorCode.none:
        return ErrorCode(answer.error_code)
    if answer.unverified:
        return (ErrorCode.transaction_abortable if ctx.version >= ABORTABLE_VERSION
                else ErrorCode.invalid_txn_state)
    return ErrorCode.none
