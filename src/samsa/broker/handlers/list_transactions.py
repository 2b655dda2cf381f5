"""ListTransactions (key 66, KIP-664): the transactional ids this node coordinates.

Only ids the caller may DESCRIBE are listed. Filters: states (Kafka's names; names that are
no state come back in ``unknown_state_filters``), producer ids, and from v1 a duration:
only transactions open longer than it. Versions (v0-1 served; v2's id pattern is not).
Built as v1, typed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v1 import response as v1
from kio.schema.types import ProducerId, TransactionalId

from samsa.broker import access
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import TxnState
from samsa.transactions.coordinator import STATE_NAMES

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = (0, 1)


async def handle(ctx: RequestContext) -> v1.ListTransactionsResponse:
    body = ctx.body
    known = set(STATE_NAMES.values())
    states = set(body.state_filters)
    pids = set(body.producer_id_filters)
    duration = int(getattr(body, "duration_filter", -1))
    now = now_ms()
    found = [
        (tid, txn) for tid, txn in ctx.broker.transactions.transactions()
        if (not states or STATE_NAMES[txn.state] in states)
        and (not pids or txn.producer_id in pids)
        and (duration < 0 or (txn.state is TxnState.ONGOING and now - txn.start_ms > duration))]
    visible = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                   [tid for tid, _ in found], log=False)
    return v1.ListTransactionsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        unknown_state_filters=tuple(sorted(states - known)),
        transaction_states=tuple(
            v1.TransactionState(transactional_id=TransactionalId(tid),
                                producer_id=ProducerId(txn.producer_id),
                                transaction_state=STATE_NAMES[txn.state])
            for tid, txn in found if tid in visible))
