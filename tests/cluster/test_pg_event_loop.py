"""A cluster node keeps serving its other connections while a request waits on PostgreSQL.

The delay is real and injected at the database: the test holds a table lock from a
connection of its own, so the node's query for one request waits on it (seen in
``pg_stat_activity``); meanwhile ApiVersions on another connection must be answered (a
node blocking its event loop on the database would stall it, and every heartbeat and
fetch with it). Once the lock goes, the waiting request gets its right answer.

* ListOffsets by timestamp (``samsa_batches`` locked);
* IncrementalAlterConfigs of a group config (``samsa_configs`` locked against writes);
* Metadata asking for a topic the node does not know (``samsa_topics`` locked): it reads
  the catalog again before answering, so a topic written to the database a moment ago
  (as another node's CreateTopics would, before this node's tick) is found;
* topic changes: CreateTopics, CreatePartitions, IncrementalAlterConfigs of a topic,
  DeleteTopics (``samsa_topics`` or ``samsa_partitions`` locked against writes);
* a share partition's ``by_duration`` start, looked up by timestamp at the group's first
  ShareFetch (``samsa_batches`` locked);
* a topic auto-created by Metadata, and ``__transaction_state`` created by the first
  transactional request (``samsa_topics`` locked against writes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
import pytest
from kio.schema.errors import ErrorCode

from samsa.protocol.api_keys import ApiKey
from tests.broker.test_connection_order import pipelined
from tests.broker.test_share_wire import acquired, fetch
from tests.cluster.nodes import ClusterNodeProcess, query
from tests.cluster.test_cluster_clients import TOPIC, Cluster, create_topic
from tests.conformance.groupkit import produce
from tests.conformance.sharekit import SHARE_BROKER_CONFIG, set_group_configs
from tests.pg import PostgresServer
from tests.security.kit import call
from tests.wire import WireClient

pytestmark = [pytest.mark.slow]

TOPIC_RESOURCE, GROUP = 2, 32


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory,
         postgres: PostgresServer) -> Iterator[tuple[ClusterNodeProcess, str]]:
    dsn = postgres.create_database()
    cluster = Cluster(tmp_path_factory.mktemp("pg-loop"), dsn, SHARE_BROKER_CONFIG)
    try:
        one = cluster.start(1)
        create_topic(one.bootstrap, 1)
        produce(one.bootstrap, TOPIC, 1, 3)
        cluster.settled()
        yield one, dsn
    finally:
        cluster.stop()


def ask(bootstrap: str, api: ApiKey, version: int, timeout: float = 30.0,
        **fields: Any) -> Any:
    """One request on a connection of its own (``timeout``: for the answer)."""
    c = WireClient(bootstrap, timeout=timeout)
    try:
        return call(c, api, version, **fields)
    finally:
        c.close()


def api_versions(bootstrap: str) -> int:
    """ApiVersions' error code; a TimeoutError if not answered within 5 s."""
    return int(ask(bootstrap, ApiKey.API_VERSIONS, 3, timeout=5.0, client_software_name="t",
                   client_software_version="1").error_code)


def while_locked(dsn: str, lock: str, waits_on: str, request: Callable[[], Any],
                 bootstrap: str) -> Any:
    """Hold ``lock``; send ``request`` (blocking, on its own connection) and once the node's
    query matching ``waits_on`` waits on the lock, check another connection is served; then
    release the lock and return the request's answer."""
    (answer,) = while_locked_all(dsn, lock, waits_on, [request], bootstrap)
    return answer


def while_locked_all(dsn: str, lock: str, waits_on: str, requests: list[Callable[[], Any]],
                     bootstrap: str) -> list[Any]:
    """:func:`while_locked` with several requests, sent in turn: each once the queries of
    those before it wait on the lock (so that they wait in that order, as PostgreSQL grants
    a row lock); the answers in the order sent."""

    async def scenario() -> list[Any]:
        holder = await asyncpg.connect(dsn)
        watcher = await asyncpg.connect(dsn)
        tx = holder.transaction()
        await tx.start()
        pending: list[asyncio.Future[Any]] = []
        try:
            await holder.execute(lock)
            for request in requests:
                pending.append(asyncio.ensure_future(asyncio.to_thread(request)))
                for _ in range(200):  # until the node's query waits on the lock
                    if await watcher.fetchval(
                            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                            "'Lock' AND query LIKE $1", f"%{waits_on}%") >= len(pending):
                        break
                    for p in pending:
                        assert not p.done(), p.result()
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError(f"the node never queried {waits_on!r}")
            assert await asyncio.to_thread(api_versions, bootstrap) == ErrorCode.none
            assert not any(p.done() for p in pending)  # still waiting on the database
        finally:
            await tx.rollback()
            await holder.close()
            await watcher.close()
        return [await p for p in pending]

    return asyncio.run(scenario())


def test_list_offsets_by_timestamp_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node

    def by_timestamp() -> Any:
        return ask(one.bootstrap, ApiKey.LIST_OFFSETS, 8, replica_id=-1, isolation_level=0,
                   topics=[{"name": TOPIC, "partitions": [
                       {"partition_index": 0, "timestamp": 0, "current_leader_epoch": -1}]}])

    resp = while_locked(dsn, "LOCK TABLE samsa_batches IN ACCESS EXCLUSIVE MODE",
                        "max_ts >=", by_timestamp, one.bootstrap)
    (p,) = resp.topics[0].partitions
    assert (p.error_code, p.offset) == (ErrorCode.none, 0)


def test_group_config_change_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node

    def alter() -> Any:
        return ask(one.bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False,
                   resources=[{"resource_type": GROUP, "resource_name": "g",
                               "configs": [{"name": "consumer.session.timeout.ms",
                                            "config_operation": 0, "value": "50000"}]}])

    resp = while_locked(dsn, "LOCK TABLE samsa_configs IN EXCLUSIVE MODE",
                        "INTO samsa_configs", alter, one.bootstrap)
    assert resp.responses[0].error_code == ErrorCode.none
    (row,) = query(dsn, "SELECT configs::text FROM samsa_configs WHERE name = 'g'")
    assert '"consumer.session.timeout.ms": "50000"' in row["configs"]


def metadata(bootstrap: str, name: str, create: bool = False) -> Any:
    return ask(bootstrap, ApiKey.METADATA, 12, topics=[{"name": name, "topic_id": None}],
               allow_auto_topic_creation=create, include_topic_authorized_operations=False)


def test_unknown_topic_lookup_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node
    resp = while_locked(dsn, "LOCK TABLE samsa_topics IN ACCESS EXCLUSIVE MODE",
                        "FROM samsa_topics", lambda: metadata(one.bootstrap, "nowhere"),
                        one.bootstrap)
    assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition

    async def create_behind_the_node() -> None:  # no NOTIFY: the node's tick is not woken
        conn = await asyncpg.connect(dsn)
        try:
            async with conn.transaction():
                await conn.execute("INSERT INTO samsa_topics (name, id, configs) "
                                   "VALUES ('fresh', gen_random_uuid(), '{}'::jsonb)")
                await conn.execute("INSERT INTO samsa_partitions (topic, idx) VALUES ('fresh', 0)")
                await conn.execute(
                    "UPDATE samsa_meta SET v = v + 1 WHERE k = 'topics_version'")
        finally:
            await conn.close()

    asyncio.run(create_behind_the_node())
    (topic,) = metadata(one.bootstrap, "fresh").topics
    assert (topic.error_code, len(topic.partitions)) == (ErrorCode.none, 1)


# -- topic changes: each writes the catalog on the database thread ----------------------------
def admin(bootstrap: str, api: ApiKey, version: int, **fields: Any) -> Any:
    """A topic admin request (with its own ``timeout`` field) on a connection of its own."""
    c = WireClient(bootstrap, timeout=30.0)
    try:
        return call(c, api, version, timeout=30000, **fields)
    finally:
        c.close()


def create_topics(bootstrap: str, name: str, partitions: int = 1) -> Any:
    return admin(bootstrap, ApiKey.CREATE_TOPICS, 7, validate_only=False,
                 topics=[{"name": name, "num_partitions": partitions, "replication_factor": -1,
                          "assignments": [], "configs": []}])


def test_create_topics_waits_off_the_event_loop(node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node
    resp = while_locked(dsn, "LOCK TABLE samsa_topics IN EXCLUSIVE MODE",
                        "INTO samsa_topics", lambda: create_topics(one.bootstrap, "made", 2),
                        one.bootstrap)
    assert resp.topics[0].error_code == ErrorCode.none
    (topic,) = metadata(one.bootstrap, "made").topics
    assert (topic.error_code, len(topic.partitions)) == (ErrorCode.none, 2)
    # the same name again: refused as before
    assert create_topics(one.bootstrap, "made").topics[0].error_code == \
        ErrorCode.topic_already_exists


def test_a_request_sent_after_create_topics_sees_the_topic(
        node: tuple[ClusterNodeProcess, str]) -> None:
    """CreateTopics waiting on the database holds its connection's later requests back: a
    Metadata pipelined behind it is answered after it, and finds the topic."""
    one, dsn = node

    def create_then_describe() -> list[Any]:
        c = WireClient(one.bootstrap, timeout=30.0)
        try:
            return pipelined(c, (ApiKey.CREATE_TOPICS, 7, {
                "timeout": 30000, "validate_only": False, "topics": [{
                    "name": "ordered", "num_partitions": 1, "replication_factor": -1,
                    "assignments": [], "configs": []}]}),
                (ApiKey.METADATA, 12, {
                    "topics": [{"name": "ordered", "topic_id": None}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}))
        finally:
            c.close()

    made, described = while_locked(dsn, "LOCK TABLE samsa_topics IN EXCLUSIVE MODE",
                                   "INTO samsa_topics", create_then_describe, one.bootstrap)
    assert made.topics[0].error_code == ErrorCode.none
    assert described.topics[0].error_code == ErrorCode.none


def test_create_partitions_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node
    assert create_topics(one.bootstrap, "grown").topics[0].error_code == ErrorCode.none

    def grow() -> Any:
        return admin(one.bootstrap, ApiKey.CREATE_PARTITIONS, 3, validate_only=False,
                     topics=[{"name": "grown", "count": 3, "assignments": None}])

    resp = while_locked(dsn, "LOCK TABLE samsa_partitions IN EXCLUSIVE MODE",
                        "INTO samsa_partitions", grow, one.bootstrap)
    assert resp.results[0].error_code == ErrorCode.none
    (topic,) = metadata(one.bootstrap, "grown").topics
    assert len(topic.partitions) == 3


def test_topic_config_change_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node
    assert create_topics(one.bootstrap, "altered").topics[0].error_code == ErrorCode.none

    def alter() -> Any:
        return ask(one.bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False,
                   resources=[{"resource_type": TOPIC_RESOURCE, "resource_name": "altered",
                               "configs": [{"name": "retention.ms", "config_operation": 0,
                                            "value": "123456"}]}])

    resp = while_locked(dsn, "LOCK TABLE samsa_topics IN EXCLUSIVE MODE",
                        "UPDATE samsa_topics", alter, one.bootstrap)
    assert resp.responses[0].error_code == ErrorCode.none
    (row,) = query(dsn, "SELECT configs::text FROM samsa_topics WHERE name = 'altered'")
    assert '"retention.ms": "123456"' in row["configs"]


def test_delete_topics_waits_off_the_event_loop(node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node
    assert create_topics(one.bootstrap, "doomed").topics[0].error_code == ErrorCode.none

    def delete() -> Any:
        return admin(one.bootstrap, ApiKey.DELETE_TOPICS, 6,
                     topics=[{"name": "doomed", "topic_id": None}])

    resp = while_locked(dsn, "LOCK TABLE samsa_topics IN EXCLUSIVE MODE",
                        "DELETE FROM samsa_topics", delete, one.bootstrap)
    assert resp.responses[0].error_code == ErrorCode.none
    assert metadata(one.bootstrap, "doomed").topics[0].error_code == \
        ErrorCode.unknown_topic_or_partition


def test_share_partition_by_duration_start_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    """A share partition starting ``by_duration`` looks its start offset up by timestamp
    before it is created (the first ShareFetch of the group)."""
    one, dsn = node
    set_group_configs(one.bootstrap, "by-hour", {"share.auto.offset.reset": "by_duration:PT1H"})
    (topic,) = metadata(one.bootstrap, TOPIC).topics

    def first_fetch() -> Any:
        c = WireClient(one.bootstrap, timeout=30.0)
        try:
            return fetch(c, 1, "by-hour", "m", 0, topic.topic_id, max_wait=10000)
        finally:
            c.close()

    resp = while_locked(dsn, "LOCK TABLE samsa_batches IN ACCESS EXCLUSIVE MODE",
                        "max_ts >= $2 AND last_offset", first_fetch, one.bootstrap)
    assert resp.error_code == ErrorCode.none
    assert acquired(resp)[0][0] == 0  # the records of the last hour: all three ("latest": none)


# -- topics created without a CreateTopics: written on the database thread too ---------------
def test_auto_created_topic_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    """Metadata auto-creating a topic on two connections at once: the node serves a third
    meanwhile, and both are answered with the one topic created (neither is told it
    already exists)."""
    one, dsn = node

    def twice() -> list[Any]:
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(lambda _: metadata(one.bootstrap, "auto-made", create=True),
                                 range(2)))

    answers = while_locked(dsn, "LOCK TABLE samsa_topics IN EXCLUSIVE MODE",
                           "INTO samsa_topics", twice, one.bootstrap)
    (row,) = query(dsn, "SELECT t.id, count(p.pid) AS n FROM samsa_topics t JOIN "
                        "samsa_partitions p ON p.topic = t.name WHERE t.name = 'auto-made' "
                        "GROUP BY t.id")
    assert row["n"] == 1  # num.partitions
    for resp in answers:
        (topic,) = resp.topics
        assert (topic.error_code, topic.name, topic.topic_id, len(topic.partitions)) == \
            (ErrorCode.none, "auto-made", row["id"], 1)


def find_txn_coordinator(bootstrap: str) -> Any:
    """FindCoordinator of a transactional id, asked until answered with a coordinator (the
    first one starts creating ``__transaction_state``)."""
    for _ in range(600):
        (found,) = ask(bootstrap, ApiKey.FIND_COORDINATOR, 4, key_type=1,
                       coordinator_keys=["tx"]).coordinators
        if found.error_code == ErrorCode.none:
            return found
        time.sleep(0.05)
    raise AssertionError("no transaction coordinator")


def test_transaction_state_topic_waits_off_the_event_loop(
        node: tuple[ClusterNodeProcess, str]) -> None:
    one, dsn = node
    assert not query(dsn, "SELECT 1 FROM samsa_topics WHERE name = '__transaction_state'")
    found = while_locked(dsn, "LOCK TABLE samsa_topics IN EXCLUSIVE MODE",
                         "INTO samsa_topics", lambda: find_txn_coordinator(one.bootstrap),
                         one.bootstrap)
    assert found.node_id == 1
    (row,) = query(dsn, "SELECT count(*) AS n FROM samsa_partitions "
                        "WHERE topic = '__transaction_state'")
    assert row["n"] == 50  # transaction.state.log.num.partitions
