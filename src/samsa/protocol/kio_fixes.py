"""Response schemas kio cannot decode as Kafka sends them, replaced for decoding.

kio reads an ``int64`` of kafka_type ``datetime_i64`` as a datetime and refuses a negative
one, but Kafka sends -1 for "none" in some of them: DescribeTransactions v0's
``transaction_start_time`` is -1 for a transactional id with no open transaction. These
subclasses read such a field as a plain ``int64`` (milliseconds, -1 kept); everything else
is kio's. (No ``from __future__ import annotations`` here: kio reads the field types.)
"""

from dataclasses import dataclass, field
from typing import Any

from kio.schema.describe_transactions.v0 import response as describe_transactions_v0
from kio.static.primitive import i64

__all__ = ["RESPONSE_SCHEMAS"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _TransactionState(describe_transactions_v0.TransactionState):
    transaction_start_time: i64 = field(  # type: ignore[assignment]
        metadata={"kafka_type": "int64"})
    """Milliseconds; -1 without an open transaction."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _DescribeTransactionsResponse(describe_transactions_v0.DescribeTransactionsResponse):
    transaction_states: tuple[_TransactionState, ...]


RESPONSE_SCHEMAS: dict[tuple[int, int], type[Any]] = {
    (65, 0): _DescribeTransactionsResponse,
}
"""(API key, version) -> the schema :func:`samsa.protocol.codec.decode_response` uses."""
