"""samsa's Python client: Consumer, Producer and Admin (see ``docs/client.md``)."""

from samsa.client.admin import Admin
from samsa.client.consumer import Consumer, ConsumerRebalanceListener
from samsa.client.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    WakeupError,
)
from samsa.client.group.commits import OffsetAndMetadata
from samsa.client.producer import Producer
from samsa.client.records import ConsumerRecord, RecordMetadata

__all__ = [
    "Admin",
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FencedInstanceIdError",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetOutOfRangeError",
    "Producer",
    "RecordMetadata",
    "WakeupError",
]
