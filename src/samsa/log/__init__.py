"""samsa.log: the partition log (segments, indexes, recovery, retention, compaction)."""

from .config import LogConfig
from .errors import (
    InvalidProducerEpoch,
    InvalidRecords,
    LogError,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordBatchTooLarge,
)
from .log import AppendInfo, CompactionStats, PartitionLog

__all__ = [
    "AppendInfo",
    "CompactionStats",
    "InvalidProducerEpoch",
    "InvalidRecords",
    "LogConfig",
    "LogError",
    "MessageTooLarge",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PartitionLog",
    "RecordBatchTooLarge",
]
