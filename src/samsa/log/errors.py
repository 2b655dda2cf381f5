"""Exceptions raised by the partition log, each carrying the Kafka error code to answer."""

from __future__ import annotations

from samsa.protocol.batch import InvalidRecords

__all__ = [
    "InvalidProducerEpoch",
    "InvalidRecords",
    "LogError",
    "MessageTooLarge",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "RecordBatchTooLarge",
]

OFFSET_OUT_OF_RANGE = 1
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


class LogError(Exception):
    """Base class; ``error_code`` is the Kafka error code for the partition response."""

    error_code: int = -1

    def __init__(self, message: str) -> None:
        super().__init__(message)


class OffsetOutOfRange(LogError):
    error_code = OFFSET_OUT_OF_RANGE


class MessageTooLarge(LogError):
    """A batch is larger than ``max.message.bytes``."""

    error_code = MESSAGE_TOO_LARGE


class RecordBatchTooLarge(LogError):
    """A batch is larger than ``segment.bytes`` (it could never fit in a segment)."""

    error_code = RECORD_LIST_TOO_LARGE


class OutOfOrderSequence(LogError):
    error_code = OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(LogError):
    error_code = INVALID_PRODUCER_EPOCH
