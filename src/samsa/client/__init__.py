"""samsa's Python client: Consumer, Producer, Admin (see ``docs/client.md``) and
ShareConsumer (``docs/share-groups.md``)."""

from samsa.client.admin import Admin
from samsa.client.consumer import Consumer, ConsumerRebalanceListener
from samsa.client.errors import (
    AuthorizationError,
    ClusterAuthorizationError,
    CommitFailedError,
    FencedInstanceIdError,
    GroupAuthorizationError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    TopicAuthorizationError,
    TransactionAbortableError,
    TransactionalIdAuthorizationError,
    WakeupError,
)
from samsa.client.group.commits import OffsetAndMetadata
from samsa.client.producer import Producer
from samsa.client.records import ConsumerRecord, RecordMetadata
from samsa.client.share import AcknowledgeType, ShareConsumer
from samsa.client.transactions import ConsumerGroupMetadata

__all__ = [
    "AcknowledgeType",
    "Admin",
    "AuthorizationError",
    "ClusterAuthorizationError",
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FencedInstanceIdError",
    "GroupAuthorizationError",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetOutOfRangeError",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "ShareConsumer",
    "TopicAuthorizationError",
    "TransactionAbortableError",
    "TransactionalIdAuthorizationError",
    "WakeupError",
]
