"""The transaction coordinator (KIP-98, KIP-447): a pure core on ``__transaction_state``.

* :mod:`.records`: the ``__transaction_state`` key and value, in Kafka's formats;
* :mod:`.coordinator`: the shards, the requests (InitProducerId, AddPartitionsToTxn and
  AddOffsetsToTxn, EndTxn), the transaction timeout and the markers to write.

The asyncio edge is :mod:`samsa.broker.transactions`; the group side (TxnOffsetCommit) is
:mod:`samsa.coordinator.txn_offsets` with its edge :mod:`samsa.broker.txn_offsets`.
"""

from samsa.transactions.coordinator import (
    AddPartitions,
    EndTxn,
    InitProducerId,
    Markers,
    TxnAnswer,
    TxnConfig,
    TxnCoordinator,
    TxnResult,
)
from samsa.transactions.records import TxnKey, TxnState, TxnValue

__all__ = [
    "AddPartitions",
    "EndTxn",
    "InitProducerId",
    "Markers",
    "TxnAnswer",
    "TxnConfig",
    "TxnCoordinator",
    "TxnKey",
    "TxnResult",
    "TxnState",
    "TxnValue",
]
