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
    TopicAuthorizationError,
    TransactionalIdAuthorizationError,
    WakeupError,
)
from samsa.client.group.commits import OffsetAndMetadata
from samsa.client.producer import Producer
from samsa.client.records import ConsumerRecord, RecordMetadata
from samsa.client.share import AcknowledgeType, ShareConsumer

__all__ = [
    "AcknowledgeType",
    "Admin",
    "AuthorizationError",
    "ClusterAuthorizationError",
    "CommitFailedError",
    "Consumer",
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
    "RecordMetadata",
    "ShareConsumer",
    "TopicAuthorizationError",
    "TransactionalIdAuthorizationError",
    "WakeupError",
]
