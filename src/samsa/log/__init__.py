"""samsa.log: the partition log (segments, indexes, recovery, retention, compaction).

Entry point: ``PartitionLog.open(directory, LogConfig.from_mapping(topic_configs),
now_ms=...)``. Every method runs on the event-loop thread except ``flush()`` and ``clean()``
(the slow step of compaction), which may run on a worker thread. Errors carry the Kafka
``error_code`` to answer. The append preamble every storage engine runs (size checks,
LogAppendTime, offsets, the idempotent-producer check) is :func:`samsa.log.append.prepare`;
finding a record by timestamp in a batch, :func:`samsa.log.records.record_at_or_after`.
"""

from .append import AppendInfo
from .cleaner import CompactionPlan, CompactionStats
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
from .log import PartitionLog

__all__ = [
    "AppendInfo",
    "CompactionPlan",
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
