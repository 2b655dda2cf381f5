"""``__transaction_state`` records in Kafka's formats.

Key (version 0): {transactional_id string}. Value (version 0, non-flexible): {producer_id
int64, producer_epoch int16, transaction_timeout_ms int32, transaction_status int8,
transaction_partitions nullable [{topic string, partition_ids [int32]}],
transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64}. A null
value is a tombstone (an expired transactional id). Version 1 values (flexible, Kafka 4's
KIP-890 fields as tagged fields) are read, their tagged fields skipped; samsa writes v0.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from samsa.coordinator.codec import Reader, Writer
from samsa.coordinator.records import RecordDecodeError

__all__ = ["TxnKey", "TxnState", "TxnValue", "deserialize", "serialize"]


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids, as stored in ``transaction_status``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


@dataclass(frozen=True)
class TxnKey:
    transactional_id: str


@dataclass(frozen=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    #: (topic, partition), sorted
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int


def serialize(key: TxnKey, value: TxnValue | None) -> tuple[bytes, bytes | None]:
    raw_key = Writer().int16(0).string(key.transactional_id).done()
    if value is None:
        return raw_key, None
    by_topic: dict[str, list[int]] = {}
    for topic, partition in value.partitions:
        by_topic.setdefault(topic, []).append(partition)
    w = (Writer().int16(0).int64(value.producer_id).int16(value.producer_epoch)
         .int32(value.timeout_ms).int8(int(value.state)).int32(len(by_topic)))
    for topic, parts in by_topic.items():
        w.string(topic).int32(len(parts))
        for p in parts:
            w.int32(p)
    w.int64(value.last_update_ms).int64(value.start_ms)
    return raw_key, w.done()


def deserialize(key: bytes, value: bytes | None) -> tuple[TxnKey, TxnValue | None] | None:
    """The typed record; None for a key version this coordinator does not know."""
    r = Reader(key, RecordDecodeError)
    if r.int16() != 0:
        return None
    txn_key = TxnKey(r.string())
    if value is None:
        return txn_key, None
    v = Reader(value, RecordDecodeError)
    version = v.int16()
    if version not in (0, 1):
        raise RecordDecodeError(f"unknown transaction log value version {version}")
    v.flexible = version >= 1
    pid, epoch, timeout, status = v.int64(), v.int16(), v.int32(), v.int8()
    partitions: list[tuple[str, int]] = []
    count = v.uvarint() - 1 if v.flexible else v.int32()
    for _ in range(max(count, 0)):
        topic = v.string()
        for _ in range(v.array_len()):
            partitions.append((topic, v.int32()))
        v.tagged_fields()
    last_update, start = v.int64(), v.int64()
    try:
        state = TxnState(status)
    except ValueError as exc:
        raise RecordDecodeError(f"unknown transaction status {status}") from exc
    return txn_key, TxnValue(pid, epoch, timeout, state, tuple(sorted(partitions)),
                             last_update, start)
