"""Client exceptions: Kafka error codes as exceptions, plus client-side conditions."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

__all__ = [
    "METADATA_ERRORS",
    "AuthenticationError",
    "AuthorizationError",
    "ClusterAuthorizationError",
    "CommitFailedError",
    "FencedInstanceIdError",
    "GroupAuthorizationError",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "ProducerFencedError",
    "TopicAuthorizationError",
    "TransactionAbortableError",
    "TransactionalIdAuthorizationError",
    "WakeupError",
    "error_for",
]


#: partition errors that mean the client's metadata is stale: refresh it, then retry
METADATA_ERRORS: frozenset[int] = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.unknown_topic_id})


class KafkaError(Exception):
    """A Kafka error; ``code`` is the protocol error code (-1 for client-side errors)."""

    code: int = -1
    retriable: bool = False

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code
            try:
                self.retriable = bool(ErrorCode(code).retriable)
            except ValueError:
                self.retriable = False

    @property
    def name(self) -> str:
        """Kafka's name of the error code (lower case), or the class name."""
        try:
            return ErrorCode(self.code).name
        except ValueError:
            return self.__class__.__name__


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or was closed; the request may be retried."""

    retriable = True


class AuthenticationError(KafkaError):
    """The broker refused the client's credentials (SASL) or TLS failed its checks: not
    retried, as Kafka's ``AuthenticationException``."""

    code = int(ErrorCode.sasl_authentication_failed)


class AuthorizationError(KafkaError):
    """The broker's ACLs refused the principal an operation (Kafka's
    ``AuthorizationException``): raised at once, never retried."""


class TopicAuthorizationError(AuthorizationError):
    """TOPIC_AUTHORIZATION_FAILED; ``topics``: the topics refused, where known (Kafka's
    ``TopicAuthorizationException.unauthorizedTopics``)."""

    code = int(ErrorCode.topic_authorization_failed)

    def __init__(self, message: str = "", code: int | None = None,
                 topics: Iterable[str] = ()) -> None:
        super().__init__(message, code)
        self.topics = frozenset(topics)

    @classmethod
    def of(cls, topics: Iterable[str]) -> TopicAuthorizationError:
        """The error for these topics, with Kafka's message."""
        names = sorted(topics)
        return cls(f"topic_authorization_failed: not authorized to access topics: "
                   f"{', '.join(names)}", topics=names)


class GroupAuthorizationError(AuthorizationError):
    """GROUP_AUTHORIZATION_FAILED."""

    code = int(ErrorCode.group_authorization_failed)


class ClusterAuthorizationError(AuthorizationError):
    """CLUSTER_AUTHORIZATION_FAILED (e.g. an idempotent producer refused a producer id)."""

    code = int(ErrorCode.cluster_authorization_failed)


class TransactionalIdAuthorizationError(AuthorizationError):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""

    code = int(ErrorCode.transactional_id_authorization_failed)


class KafkaTimeoutError(KafkaError):
    """An operation did not complete within its timeout."""

    retriable = True


class WakeupError(KafkaError):
    """A blocked ``Consumer.poll`` was interrupted by ``Consumer.wakeup()``."""


class IllegalStateError(KafkaError):
    """The call is not allowed in the consumer's current state."""


class CommitFailedError(KafkaError):
    """A synchronous commit failed because the group rebalanced; the member rejoins."""


class FencedInstanceIdError(KafkaError):
    """Another consumer with the same ``group_instance_id`` took over: fatal."""

    code = int(ErrorCode.fenced_instance_id)


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset="none"``."""


class OffsetOutOfRangeError(KafkaError):
    """The fetch position is out of range and ``auto_offset_reset="none"``."""

    code = int(ErrorCode.offset_out_of_range)


class ProducerFencedError(KafkaError):
    """PRODUCER_FENCED or INVALID_PRODUCER_EPOCH: a newer producer with the same
    transactional id took over (or the transaction timed out and the coordinator bumped the
    epoch). Fatal for a transactional producer: close it."""

    code = int(ErrorCode.producer_fenced)


class TransactionAbortableError(KafkaError):
    """The open transaction cannot commit (a batch failed, the group refused the offsets,
    a topic or group was unauthorized): ``abort_transaction()``, then go on."""


_AUTHORIZATION: dict[int, type[KafkaError]] = {
    cls.code: cls for cls in (TopicAuthorizationError, GroupAuthorizationError,
                              ClusterAuthorizationError, TransactionalIdAuthorizationError)}


def error_for(code: int | ErrorCode, message: str = "") -> KafkaError:
    """The exception for a non-zero Kafka error code (the authorization errors, fencing of
    an instance or a producer and out-of-range offsets as their own types)."""
    code = int(code)
    if code == ErrorCode.fenced_instance_id:
        return FencedInstanceIdError(message or "fenced_instance_id")
    if code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch):
        return ProducerFencedError(f"{ErrorCode(code).name}: {message}" if message
                                   else ErrorCode(code).name, code)
    if code == ErrorCode.offset_out_of_range:
        return OffsetOutOfRangeError(message or "offset_out_of_range")
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return _AUTHORIZATION.get(code, KafkaError)(f"{name}: {message}" if message else name, code)
