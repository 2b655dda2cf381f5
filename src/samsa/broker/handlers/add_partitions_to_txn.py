"""AddPartitionsToTxn (key 24): partitions join the producer's open transaction.

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition) and on each topic (TOPIC_AUTHORIZATION_FAILED; the others then get
OPERATION_NOT_ATTEMPTED, as in Kafka); a partition this broker does not have gets
UNKNOWN_TOPIC_OR_PARTITION (the others OPERATION_NOT_ATTEMPTED). The transaction
coordinator's answer applies to every partition.
Versions (v0-3 served, the clients' versions; v4+ is broker-to-broker verification): v1 the
same; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3 flexible. Built as v3, typed.
"""

from __future__ import annotations

from kio.schema.add_partitions_to_txn.v3 import response as v3
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.transactions import fenced_code
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import AddPartitions

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 3)
FENCED_VERSION = 2


async def handle(ctx: RequestContext) -> v3.AddPartitionsToTxnResponse:
    ctx.hold()  # in order: the coordinator may wait before it handles it
    body = ctx.body
    tid = body.v3_and_below_transactional_id
    wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not access.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        errors = {tp: ErrorCode.transactional_id_authorization_failed for tp in wanted}
    else:
        writable = access.allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                        [t for t, _ in wanted])
        for topic, index in wanted:
            if topic not in writable:
                errors[(topic, index)] = ErrorCode.topic_authorization_failed
            elif ctx.broker.topics.partition(topic, index) is None:
                errors[(topic, index)] = ErrorCode.unknown_topic_or_partition
    if errors:
        code = {tp: errors.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
    else:
        answer = await ctx.broker.transactions.call(AddPartitions(
            tid, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
            tuple(wanted)))
        one = fenced_code(answer.error_code, ctx.version, FENCED_VERSION)
        code = dict.fromkeys(wanted, one)
    topics: dict[str, list[v3.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in code.items():
        topics.setdefault(topic, []).append(v3.AddPartitionsToTxnPartitionResult(
            partition_index=i32(index), partition_error_code=error))
    return v3.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            v3.AddPartitionsToTxnTopicResult(name=TopicName(name), results_by_partition=tuple(r))
            for name, r in topics.items()))
