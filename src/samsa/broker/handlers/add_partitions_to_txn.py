"""AddPartitionsToTxn (key 24): partitions join the producer's open transaction.

Client versions (v0-3): needs WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and on each topic
(TOPIC_AUTHORIZATION_FAILED; the others then get OPERATION_NOT_ATTEMPTED, as in Kafka); a
partition this broker does not have gets UNKNOWN_TOPIC_OR_PARTITION (the others
OPERATION_NOT_ATTEMPTED). The transaction coordinator's answer applies to every partition.
v1 the same; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3 flexible. Built as v3.

Broker versions (v4-5, KIP-890 part 1): several transactions in one request, sent by a
partition leader to the transaction coordinator. Needs CLUSTER_ACTION on the cluster (else
the top-level CLUSTER_AUTHORIZATION_FAILED and no results). Each transaction is answered on
its own: unknown partitions as above; with ``verify_only`` the coordinator only says
whether each partition is in the producer's open transaction (those that are not:
TRANSACTION_ABORTABLE in v5, INVALID_TXN_STATE in v4, which predates it; a producer error
applies to every partition); without it the partitions are added, as a client's request.
samsa's own leaders ask in process (or through the cluster's database), not with this
request: it is served for Kafka's tools and tests. Built as v5.
"""

from __future__ import annotations

import asyncio

from kio.schema.add_partitions_to_txn.v3 import response as v3
from kio.schema.add_partitions_to_txn.v4 import request as v4_request
from kio.schema.add_partitions_to_txn.v5 import request as v5_request
from kio.schema.add_partitions_to_txn.v5 import response as v5
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.transactions import fenced_code
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import AddPartitions

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 5)
FENCED_VERSION = 2
BROKER_VERSION = 4
"""From this version the request comes from brokers (batched, ``verify_only``)."""
ABORTABLE_VERSION = 5
"""From this version a partition outside the transaction is TRANSACTION_ABORTABLE."""

Codes = dict[tuple[str, int], ErrorCode]


async def handle(ctx: RequestContext) -> v3.AddPartitionsToTxnResponse | \
        v5.AddPartitionsToTxnResponse:
    ctx.hold()  # in order: the coordinator may wait before it handles it
    if ctx.version >= BROKER_VERSION:
        return await _from_brokers(ctx)
    body = ctx.body
    tid = body.v3_and_below_transactional_id
    wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
    errors: Codes = {}
    if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        errors = {tp: ErrorCode.transactional_id_authorization_failed for tp in wanted}
    else:
        writable = access.allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                        [t for t, _ in wanted])
        for topic, index in wanted:
            if topic not in writable:
                errors[(topic, index)] = ErrorCode.topic_authorization_failed
    code = _unknown(ctx, wanted, errors)
    if code is None:
        answer = await ctx.broker.transactions.call(AddPartitions(
            tid, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
            tuple(wanted)))
        one = fenced_code(answer.error_code, ctx.version, FENCED_VERSION)
        code = dict.fromkeys(wanted, one)
    return v3.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            v3.AddPartitionsToTxnTopicResult(name=TopicName(name), results_by_partition=tuple(
                v3.AddPartitionsToTxnPartitionResult(partition_index=i32(i),
                                                     partition_error_code=e)
                for i, e in results))
            for name, results in _by_topic(code).items()))


def _unknown(ctx: RequestContext, wanted: list[tuple[str, int]], errors: Codes
             ) -> Codes | None:
    """Every partition's code when some are refused or unknown here (the others are
    OPERATION_NOT_ATTEMPTED); None when the coordinator is to be asked."""
    for tp in wanted:
        if tp not in errors and ctx.broker.topics.partition(*tp) is None:
            errors[tp] = ErrorCode.unknown_topic_or_partition
    if not errors:
        return None
    return {tp: errors.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}


def _by_topic(codes: Codes) -> dict[str, list[tuple[int, ErrorCode]]]:
    topics: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, index), error in codes.items():
        topics.setdefault(topic, []).append((index, error))
    return topics


async def _from_brokers(ctx: RequestContext) -> v5.AddPartitionsToTxnResponse:
    if not access.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return v5.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=())
    txns = ctx.body.transactions
    codes = await asyncio.gather(*(_transaction(ctx, t) for t in txns))
    return v5.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        results_by_transaction=tuple(
            v5.AddPartitionsToTxnResult(
                transactional_id=TransactionalId(t.transactional_id),
                topic_results=tuple(
                    v5.AddPartitionsToTxnTopicResult(
                        name=TopicName(name), results_by_partition=tuple(
                            v5.AddPartitionsToTxnPartitionResult(
                                partition_index=i32(i), partition_error_code=e)
                            for i, e in results))
                    for name, results in _by_topic(code).items()))
            for t, code in zip(txns, codes, strict=True)))


async def _transaction(ctx: RequestContext,
                       txn: v4_request.AddPartitionsToTxnTransaction
                       | v5_request.AddPartitionsToTxnTransaction) -> Codes:
    """One transaction of a broker's request: each partition's code."""
    wanted: list[tuple[str, int]] = [(t.name, int(p)) for t in txn.topics
                                     for p in t.partitions]
    code = _unknown(ctx, wanted, {})
    if code is not None:
        return code
    answer = await ctx.broker.transactions.call(AddPartitions(
        txn.transactional_id, txn.producer_id, txn.producer_epoch, tuple(wanted),
        verify_only=txn.verify_only))
    if answer.error_code != ErrorCode.none:
        return dict.fromkeys(wanted, ErrorCode(answer.error_code))
    outside = (ErrorCode.transaction_abortable if ctx.version >= ABORTABLE_VERSION
               else ErrorCode.invalid_txn_state)
    return {tp: outside if tp in answer.unverified else ErrorCode.none for tp in wanted}
