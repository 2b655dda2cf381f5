"""Exceptions raised by the partition log, each carrying the Kafka error code to answer."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

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

class LogError(Exception):
    """Base class; ``error_code`` is the Kafka error code for the partition response."""

    error_code: int = -1

    def __init__(self, message: str) -> None:
        super().__init__(message)


class OffsetOutOfRange(LogError):
    error_code = ErrorCode.offset_out_of_range


class MessageTooLarge(LogError):
    """A batch is larger than ``max.message.bytes``."""

    error_code = ErrorCode.message_too_large


class RecordBatchTooLarge(LogError):
    """A batch is larger than ``segment.bytes`` (it could never fit in a segment)."""

    error_code = ErrorCode.record_list_too_large


class OutOfOrderSequence(LogError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpoch(LogError):
    error_code = ErrorCode.invalid_producer_epoch
