"""Topic changes racing on two nodes of a cluster.

Two deletions of one topic, through two nodes at once: the first takes effect, the second is
answered as Kafka answers it (UNKNOWN_TOPIC_OR_PARTITION by name, UNKNOWN_TOPIC_ID by id),
never a second success. The race is made real and ordered at the database: the test holds
the topic's row locked, sends the deletions one after the other once the previous one's
query waits on it (PostgreSQL grants the row to its waiters in that order), then lets go.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from tests.cluster.nodes import query
from tests.cluster.test_cluster_clients import Cluster
from tests.cluster.test_pg_event_loop import admin, while_locked_all

pytestmark = [pytest.mark.conformance, pytest.mark.slow]


@pytest.fixture
def two_nodes(tmp_path: Path, pg_dsn: str) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, pg_dsn)
    try:
        cluster.start(1)
        cluster.start(2)
        yield cluster
    finally:
        cluster.stop()


def _row_locked(name: str) -> str:
    return f"SELECT 1 FROM samsa_topics WHERE name = '{name}' FOR UPDATE"


def _admin_delete(bootstrap: str, name: str) -> int:
    """confluent-kafka's AdminClient deletes ``name``: its error code (0 for none)."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    try:
        client.delete_topics([name], operation_timeout=30)[name].result(60)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def _wire_delete(bootstrap: str, name: str | None = None, topic_id: object = None) -> int:
    """DeleteTopics v6 of one topic, by name or by id: its error code."""
    (result,) = admin(bootstrap, ApiKey.DELETE_TOPICS, 6,
                      topics=[{"name": name, "topic_id": topic_id}]).responses
    return int(result.error_code)


def test_only_one_of_two_concurrent_deletions_succeeds(two_nodes: Cluster) -> None:
    one, two = two_nodes.nodes[1].bootstrap, two_nodes.nodes[2].bootstrap
    creator = AdminClient({"bootstrap.servers": one})
    for future in creator.create_topics(
            [NewTopic(name, 2, 1) for name in ("by-name", "by-id")]).values():
        future.result(30)

    # by name: node 2 first, then the AdminClient (its DeleteTopics goes to node 1)
    answers = while_locked_all(two_nodes.dsn, _row_locked("by-name"), "DELETE FROM samsa_topics",
                               [lambda: _wire_delete(two, "by-name"),
                                lambda: _admin_delete(one, "by-name")], one)
    assert answers == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]

    # by id: node 1 first, then node 2
    (row,) = query(two_nodes.dsn, "SELECT id FROM samsa_topics WHERE name = 'by-id'")
    answers = while_locked_all(two_nodes.dsn, _row_locked("by-id"), "DELETE FROM samsa_topics",
                               [lambda: _wire_delete(one, topic_id=row["id"]),
                                lambda: _wire_delete(two, topic_id=row["id"])], one)
    assert answers == [ErrorCode.none, ErrorCode.unknown_topic_id]
    assert not query(two_nodes.dsn, "SELECT 1 FROM samsa_topics WHERE name LIKE 'by-%'")
