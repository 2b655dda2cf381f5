"""DescribeTransactions (key 65, KIP-664): each transactional id's state, producer, timeout,
start time and partitions, from the transaction coordinator.

Needs DESCRIBE on each id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an id the
coordinator does not know is TRANSACTIONAL_ID_NOT_FOUND. Versions: v0. Built typed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.describe_transactions.v0 import response as v0
from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, build
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions.coordinator import STATE_NAMES

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = (0, 0)


def _state(ctx: RequestContext, tid: str) -> v0.TransactionState:
    # an error answer carries the schema's zero values, as Kafka's; a transaction that has
    # not started has start time -1
    row: dict[str, Any] = {"transactional_id": tid, "transaction_state": "",
                           "transaction_timeout": 0, "transaction_start_time": 0,
                           "producer_id": -1, "producer_epoch": -1, "topics": []}
    if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
        row["error_code"] = ErrorCode.transactional_id_authorization_failed
        return build(v0.TransactionState, row)
    error, txn = ctx.broker.transactions.describe(tid)
    row["error_code"] = ErrorCode(error)
    if txn is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in txn.partitions:
            by_topic.setdefault(topic, []).append(partition)
        row.update(transaction_state=STATE_NAMES[txn.state],
                   transaction_timeout=txn.timeout_ms, transaction_start_time=txn.start_ms,
                   producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
                   topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
    return build(v0.TransactionState, row)


async def handle(ctx: RequestContext) -> v0.DescribeTransactionsResponse:
    return v0.DescribeTransactionsResponse(
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(_state(ctx, tid) for tid in ctx.body.transactional_ids))
