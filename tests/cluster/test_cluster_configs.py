"""Dynamic configs on three samsa nodes over PostgreSQL: group configs and the cluster-wide
broker defaults live in the database, so a change made through one node is what every node
answers and applies (a NOTIFY wakes their cluster tick), and a restart of every node keeps
them.

* a group config set with confluent-kafka's AdminClient through node 1 is described the
  same by every node; a bad value is still refused (INVALID_CONFIG); a DELETE through node
  3 reaches node 1; a restart of every node keeps what is left;
* a share group whose ``share.auto.offset.reset=earliest`` is set through one node gets the
  records produced before it joined from every partition, those led by the other nodes too;
* a dynamic cluster-wide default (``log.message.timestamp.type=LogAppendTime``) set through
  node 1 stamps the records a partition led by another node appends.

And the store itself (:mod:`samsa.storage.pg.configs`) with two nodes' engines: a save
answers every stored config, the other node's changes too; a snapshot older than the view
a node took is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from samsa.broker.storage import StoredConfigs
from samsa.protocol.api_keys import ApiKey
from samsa.storage.pg.configs import fetch_configs
from samsa.storage.pg.engine import PgEngine
from tests.cluster.test_cluster_clients import PARTITIONS, Cluster, three_nodes
from tests.cluster.test_pg_log import run
from tests.conformance.groupkit import produce
from tests.conformance.sharekit import SHARE_BROKER_CONFIG, poll_until, share_consumer
from tests.pg import PostgresServer
from tests.security.kit import call
from tests.wire import WireClient

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

BROKER, GROUP = 4, 32
GROUP_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 8, 3, 5


@pytest.fixture(scope="module")
def configs_cluster(tmp_path_factory: pytest.TempPathFactory,
                    postgres: PostgresServer) -> Iterator[Cluster]:
    dsn = postgres.create_database()
    with three_nodes(tmp_path_factory.mktemp("configs-cluster"), dsn,
                     SHARE_BROKER_CONFIG) as cluster:
        yield cluster


def described(bootstrap: str, rtype: int, name: str) -> dict[str, tuple[str | None, int]]:
    """name -> (value, source) of a resource's configs, as DescribeConfigs v4 on one node
    answers them."""
    c = WireClient(bootstrap)
    try:
        resp = call(c, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False,
                    include_documentation=False, resources=[
                        {"resource_type": rtype, "resource_name": name,
                         "configuration_keys": None}])
    finally:
        c.close()
    (result,) = resp.results
    assert result.error_code == ErrorCode.none, result
    return {e.name: (e.value, int(e.config_source)) for e in result.configs}


def _alter_on(bootstrap: str, rtype: int, name: str, key: str, value: str | None,
              op: int = 0) -> ErrorCode:
    """IncrementalAlterConfigs of one key on exactly the node of ``bootstrap``."""
    c = WireClient(bootstrap)
    try:
        resp = call(c, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
            {"resource_type": rtype, "resource_name": name, "configs": [
                {"name": key, "config_operation": op, "value": value}]}])
    finally:
        c.close()
    return ErrorCode(resp.responses[0].error_code)


def _set_group(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """confluent-kafka's AdminClient, bootstrapped on one node only."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(15)


def everywhere(cluster: Cluster, check: Callable[[str], bool], what: str,
                limit: float = 5.0) -> None:
    """Until ``check(bootstrap)`` holds on every node (a node applies a change on its next
    cluster tick, woken at once by the change's NOTIFY)."""
    deadline = time.monotonic() + limit
    for node in cluster.nodes.values():
        while not check(node.bootstrap):
            if time.monotonic() > deadline:
                raise AssertionError(f"node {node.node_id} never answered {what}")
            time.sleep(0.05)


def test_group_configs_are_the_same_on_every_node(configs_cluster: Cluster) -> None:
    cluster = configs_cluster
    one, _, three = (cluster.nodes[i].bootstrap for i in (1, 2, 3))
    group = "cfg-group"
    _set_group(one, group, {"share.auto.offset.reset": "earliest",
                            "consumer.session.timeout.ms": "50000"})

    def group_set(bootstrap: str) -> bool:
        got = described(bootstrap, GROUP, group)
        return (got["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)
                and got["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG))

    everywhere(cluster, group_set, "the group configs set through node 1")

    # validation is each node's, as before: a bad value is refused and changes nothing
    admin = AdminClient({"bootstrap.servers": cluster.nodes[2].bootstrap})
    bad = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "sometimes", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([bad])[bad].result(15)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert _alter_on(three, GROUP, group, "consumer.session.timeout.ms", "1", 0) == \
        ErrorCode.invalid_config  # below group.consumer.min.session.timeout.ms
    assert all(group_set(n.bootstrap) for n in cluster.nodes.values())

    # DELETE through node 3 reaches node 1
    assert _alter_on(three, GROUP, group, "consumer.session.timeout.ms", None, 1) == \
        ErrorCode.none
    everywhere(cluster, lambda b: described(b, GROUP, group)[
        "consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG), "the DELETE")

    # a restart of every node keeps them (nothing in a node's data directory)
    for node in cluster.nodes.values():
        assert node.stop() == 0
    for node in cluster.nodes.values():
        node.start()
    cluster.settled()
    for node in cluster.nodes.values():
        got = described(node.bootstrap, GROUP, group)
        assert got["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)
        assert got["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        assert not (node.data_dir / "dynamic-configs.json").exists()


def test_share_group_starts_where_its_config_set_through_another_node_says(
        configs_cluster: Cluster) -> None:
    cluster = configs_cluster
    topic, group = "cfg-share", "cfg-share-group"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    cluster.settled()
    leaders = {cluster.owner(topic, p) for p in range(PARTITIONS)}
    assert len(leaders) > 1  # partitions led by nodes other than the one set through
    values = produce(cluster.bootstrap, topic, PARTITIONS, 5)  # before the group exists
    through = cluster.nodes[min(leaders)].bootstrap
    _set_group(through, group, {"share.auto.offset.reset": "earliest"})
    everywhere(cluster, lambda b: described(b, GROUP, group)[
        "share.auto.offset.reset"] == ("earliest", GROUP_CONFIG), "the group config")
    consumer = share_consumer(cluster.bootstrap, group, [topic], "cfg")
    try:
        poll_until([consumer], lambda: {v for _, _, v, _ in consumer.got} >= values,
                   timeout=60)
    finally:
        consumer.close()
    assert {p for p, *_ in consumer.got} == set(range(PARTITIONS))


def _produced(bootstrap: str, topic: str, partition: int) -> Any:
    """One record with CreateTime 1,000,000 to ``partition``; its delivery report."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    reports: list[Any] = []
    p.produce(topic, value=b"x", partition=partition, timestamp=1_000_000,
              on_delivery=lambda e, m: reports.append(e or m))
    assert p.flush(15) == 0
    (report,) = reports
    assert not isinstance(report, KafkaError), report
    return report


def test_cluster_wide_broker_default_applies_on_every_node(configs_cluster: Cluster) -> None:
    cluster = configs_cluster
    topic = "cfg-times"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    cluster.settled()
    other = next(p for p in range(PARTITIONS) if cluster.owner(topic, p) != 1)
    assert _produced(cluster.bootstrap, topic, other).timestamp() == (1, 1_000_000)

    key = "log.message.timestamp.type"
    assert _alter_on(cluster.nodes[1].bootstrap, BROKER, "", key, "LogAppendTime") == \
        ErrorCode.none
    try:
        everywhere(cluster, lambda b: described(b, BROKER, "").get(key) == (
            "LogAppendTime", DYNAMIC_DEFAULT_BROKER_CONFIG), "the broker default")
        for node_id, node in cluster.nodes.items():
            assert described(node.bootstrap, BROKER, str(node_id))[key] == (
                "LogAppendTime", DYNAMIC_DEFAULT_BROKER_CONFIG)
        before = int(time.time() * 1000)
        kind, stamp = _produced(cluster.bootstrap, topic, other).timestamp()
        assert kind == 2 and stamp >= before  # LogAppendTime, stamped by the leader
        # a bad default is refused (INVALID_REQUEST, as Kafka) on any node
        assert _alter_on(cluster.nodes[2].bootstrap, BROKER, "", key, "Sometime") == \
            ErrorCode.invalid_request
    finally:
        assert _alter_on(cluster.nodes[3].bootstrap, BROKER, "", key, None, 1) == \
            ErrorCode.none
    everywhere(cluster, lambda b: key not in described(b, BROKER, ""), "the DELETE")
    assert _produced(cluster.bootstrap, topic, other).timestamp() == (1, 1_000_000)


def test_the_store_answers_every_nodes_changes(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        one, two = e1.configs, e2.configs
        assert one.snapshot() == two.snapshot() == StoredConfigs({}, {})
        assert one.snapshot() is None  # nothing new
        stale = await e1.db.run(fetch_configs)
        earliest = {"share.auto.offset.reset": "earliest"}
        assert await one.save_group("g", earliest) == StoredConfigs({}, {"g": earliest})
        assert await two.save_broker("", {"log.retention.ms": "1000"}) == StoredConfigs(
            {"": {"log.retention.ms": "1000"}}, {"g": {"share.auto.offset.reset": "earliest"}})
        saved = await two.save_broker("2", {"log.roll.ms": "5000"})
        assert saved is not None and saved.brokers == {
            "": {"log.retention.ms": "1000"}, "2": {"log.roll.ms": "5000"}}
        one.offer(stale)  # read before the node's own save: dropped
        assert one.snapshot() is None
        one.offer(await e1.db.run(fetch_configs))  # what the tick reads: node 2's changes
        assert one.snapshot() == StoredConfigs(
            {"": {"log.retention.ms": "1000"}, "2": {"log.roll.ms": "5000"}},
            {"g": {"share.auto.offset.reset": "earliest"}})
        forgotten = await one.save_group("g", {})
        assert forgotten is not None and forgotten.groups == {}
        assert two.snapshot() == StoredConfigs(
            {"": {"log.retention.ms": "1000"}, "2": {"log.roll.ms": "5000"}}, {})

    run(pg_dsn, scenario)
