"""samsa's own client against Kafka's authorizer: authorization errors come at once, typed,
as Kafka's clients raise them (``TopicAuthorizationException`` from ``send`` and ``poll``,
``GroupAuthorizationException``, a fatal ``ClusterAuthorizationException`` for an idempotent
producer refused its producer id), never as a timeout after minutes of retries.

bob may READ topics ``app-*`` and nothing else; alice may use topics and groups ``app-*``;
no one but the super user may DESCRIBE the ``hidden-*`` topics made here (see
:mod:`tests.security.kit`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from samsa import Consumer, Producer, TopicPartition
from samsa.client.errors import (
    ClusterAuthorizationError,
    GroupAuthorizationError,
    TopicAuthorizationError,
)
from samsa.security.acl import AclBinding, PatternType
from tests.security.conftest import Secure
from tests.security.kit import (
    ALLOW,
    SUBJECT,
    SUBJECT_HOST,
    Op,
    T,
    app_name,
    create_topic,
    grant,
    produce,
    revoke,
    unique,
)
from tests.security.test_clients import samsa_conf
from tests.wire import WireClient

pytestmark = pytest.mark.conformance

#: the tests before these errors were typed waited this long, then timed out
BLOCK_MS = 10_000


@pytest.fixture(scope="module")
def topics(admin: WireClient) -> Iterator[tuple[str, str]]:
    """(a topic of the application with one record, a topic only the super user sees)."""
    app, hidden = app_name("authz"), unique("hidden")
    for name in (app, hidden):
        create_topic(admin, name)
        assert produce(admin, name).responses[0].partition_responses[0].error_code == 0
    yield app, hidden


def bob(secure: Secure) -> dict[str, object]:
    return samsa_conf(secure, "SCRAM-SHA-256", "bob")


def alice(secure: Secure) -> dict[str, object]:
    return samsa_conf(secure, "SCRAM-SHA-512", "alice")


# -- the producer ------------------------------------------------------------------------------

def test_send_to_a_topic_it_may_not_describe_raises_at_once(
        secure: Secure, topics: tuple[str, str]) -> None:
    """Metadata answers TOPIC_AUTHORIZATION_FAILED: ``send`` raises it (Kafka's
    ``waitOnMetadata``), it does not wait ``max_block_ms`` for the topic to appear."""
    _, hidden = topics
    with Producer(**alice(secure), max_block_ms=BLOCK_MS) as producer:
        with pytest.raises(TopicAuthorizationError) as refused:
            producer.send(hidden, b"x")
        assert refused.value.topics == {hidden} and hidden in str(refused.value)
        with pytest.raises(TopicAuthorizationError):
            producer.partitions_for(hidden)
        app = app_name("t")  # the producer goes on with the topics it may use
        producer.send(app, b"x").result(BLOCK_MS / 1000)


def test_a_refused_write_fails_the_record_with_a_topic_authorization_error(
        secure: Secure, topics: tuple[str, str]) -> None:
    """bob may DESCRIBE (through READ) but not WRITE: Produce answers the partition
    TOPIC_AUTHORIZATION_FAILED, and the record fails with it, not retried."""
    app, _ = topics
    with Producer(**bob(secure), enable_idempotence=False, max_block_ms=BLOCK_MS) as producer, \
            pytest.raises(TopicAuthorizationError):
        producer.send(app, b"x").result(BLOCK_MS / 1000)


def test_an_idempotent_producer_refused_a_producer_id_is_fatal(
        secure: Secure, topics: tuple[str, str]) -> None:
    """bob may write no topic, so InitProducerId answers CLUSTER_AUTHORIZATION_FAILED:
    fatal, as in Kafka (not a silent fall-back to writes without idempotence). The queued
    record fails with it, every later send raises it, and the producer closes."""
    app, _ = topics
    producer = Producer(**bob(secure), max_block_ms=BLOCK_MS)
    try:
        with pytest.raises(ClusterAuthorizationError):  # from send, or from the record
            producer.send(app, b"x").result(BLOCK_MS / 1000)
        with pytest.raises(ClusterAuthorizationError):
            producer.send(app, b"y")
        assert producer.flush(BLOCK_MS / 1000) == 0
    finally:
        producer.close(BLOCK_MS / 1000)


# -- the consumer ------------------------------------------------------------------------------

def poll_until_raised(consumer: Consumer, error: type[Exception], seconds: float = 15
                      ) -> Exception:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            consumer.poll(200)
        except error as exc:
            return exc
    raise AssertionError(f"poll never raised {error.__name__}")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_subscription_to_a_topic_it_may_not_describe_raises_from_poll(
        secure: Secure, topics: tuple[str, str], protocol: str) -> None:
    """alice subscribes to a topic she may not DESCRIBE: ``poll`` raises
    TopicAuthorizationError (classic: from Metadata; KIP-848: the heartbeat's answer, not
    fatal since Kafka 4.x), and the consumer goes on when the subscription changes."""
    app, hidden = topics
    consumer = Consumer(hidden, group_id=app_name("g"), group_protocol=protocol,
                        auto_offset_reset="earliest", **alice(secure))
    try:
        poll_until_raised(consumer, TopicAuthorizationError)
        consumer.subscribe([app])
        got: list[bytes | None] = []
        stale = 0  # a heartbeat answered before the change may still be raised, once
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            try:
                got += [r.value for r in consumer.poll(200)]
            except TopicAuthorizationError:
                stale += 1
        assert got == [b"v"] and stale <= 2
    finally:
        consumer.close()


def test_an_assigned_topic_it_may_not_describe_raises_from_poll(
        secure: Secure, topics: tuple[str, str]) -> None:
    """Without a group: the assigned topic's metadata, then its offset lookup (ListOffsets
    waits for a leader the metadata will never name) raise at once."""
    _, hidden = topics
    consumer = Consumer(auto_offset_reset="earliest", default_api_timeout_ms=BLOCK_MS,
                        **alice(secure))
    try:
        consumer.assign([TopicPartition(hidden, 0)])
        for _ in range(2):
            with pytest.raises(TopicAuthorizationError) as refused:
                consumer.poll(200)
            assert refused.value.topics == {hidden}
    finally:
        consumer.close()


def test_a_fetch_refused_raises_a_topic_authorization_error(
        secure: Secure, admin: WireClient, topics: tuple[str, str]) -> None:
    """DESCRIBE without READ: the offset lookup works, the Fetch answers
    TOPIC_AUTHORIZATION_FAILED and ``poll`` raises it."""
    _, hidden = topics
    describe = [AclBinding(T, hidden, PatternType.LITERAL, SUBJECT, SUBJECT_HOST, Op.DESCRIBE,
                           ALLOW)]
    grant(admin, describe)
    consumer = Consumer(auto_offset_reset="earliest", default_api_timeout_ms=BLOCK_MS,
                        **samsa_conf(secure, "SCRAM-SHA-256", "subject"))
    try:
        consumer.assign([TopicPartition(hidden, 0)])
        poll_until_raised(consumer, TopicAuthorizationError)
        assert consumer.position(TopicPartition(hidden, 0)) == 0
    finally:
        consumer.close()
        revoke(admin, describe)


def test_a_group_it_may_not_read_is_a_fatal_group_authorization_error(
        secure: Secure, topics: tuple[str, str]) -> None:
    app, _ = topics
    consumer = Consumer(app, group_id=app_name("g"), **bob(secure))
    try:
        poll_until_raised(consumer, GroupAuthorizationError)
        with pytest.raises(GroupAuthorizationError):
            consumer.poll(200)
    finally:
        consumer.close()
