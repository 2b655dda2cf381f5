"""The console's JSON API v1 over HTTP, against a real broker and librdkafka groups."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from samsa import TopicPartition
from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, produce

from .conftest import api, console_broker, group_row, http_url, remote_console, wait_for

pytestmark = [pytest.mark.conformance, pytest.mark.slow]


def member(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "api-test",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def consume_and_commit(c: Consumer, n: int) -> None:
    """Consume ``n`` records (no more) and commit their positions."""
    got = 0
    for _ in range(200):
        got += len([m for m in c.consume(min(5, n - got), timeout=0.2) if m.error() is None])
        if got >= n:
            break
    assert got == n
    c.commit(asynchronous=False)


def test_groups_detail_history_lag_and_health(console: tuple[BrokerProcess, str]) -> None:
    proc, base = console
    create_topic(proc.bootstrap, "t", 2)
    produce(proc.bootstrap, "t", 2, 50)
    c = member(proc.bootstrap, "g", "t")
    try:
        consume_and_commit(c, 30)
        row = wait_for(lambda: (r := group_row(base, "g")) and r["state"] == "Stable"
                       and r["lag"]["verdict"] and r, what="a Stable group with lag")
        assert row["group_type"] == "classic" and row["members"] == 1
        assert row["last_rebalance"]["cause"] == "member-joined"
        assert row["coordinator"]["node_id"] == 0
        status, body = api(base, "/groups/g")
        assert status == 200
        g = body["group"]
        assert (g["state"], g["generation"], g["protocol_type"]) == ("Stable", 1, "consumer")
        [m] = g["members"]
        assert m["client_id"] == "api-test" and m["is_leader"]
        assert sorted(tuple(tp) for tp in m["assigned"]) == [("t", 0), ("t", 1)]
        live = m["liveness"]
        assert 0 <= live["since_heartbeat_ms"] <= 6000 < live["since_heartbeat_ms"] + \
            live["session_expires_in_ms"] + 1000
        status, body = api(base, "/groups/g/history")
        [event] = body["events"]
        assert event["cause"] == "member-joined" and event["outcome"] == "stable"
        assert [p["name"] for p in event["phases"]] == [
            "PreparingRebalance", "CompletingRebalance", "Stable"]
        lag = wait_for(lambda: (b := api(base, "/groups/g/lag")[1])["partitions"] and b,
                       what="lag samples")
        assert lag["lag_records"] == sum(50 - p["committed"] for p in lag["partitions"]) > 0
        assert all(p["log_end"] == 50 and p["series"] for p in lag["partitions"])
        behind = [p for p in lag["partitions"] if p["lag_records"]]
        assert behind and all(p["lag_seconds"] is not None and p["lag_seconds"] >= 0
                              for p in behind)
    finally:
        c.close()
    status, health = api(base, "/health")
    assert status == 200 and health["active"] == 4 and health["loading"] == 0
    assert health["cluster"] is None
    assert sum(s["groups"] for s in health["shards"]) >= 1
    # the member left: the history shows why
    body = wait_for(lambda: len(api(base, "/groups/g/history")[1]["events"]) == 2
                    and api(base, "/groups/g/history")[1], what="the leave event")
    left = body["events"][-1]
    assert left["cause"] == "member-left" and left["outcome"] == "empty"
    assert left["epoch_before"] == 1 and left["epoch_after"] == 2


def test_offset_reset_is_refused_while_members_exist_and_audited(
        console: tuple[BrokerProcess, str]) -> None:
    proc, base = console
    create_topic(proc.bootstrap, "r", 1)
    produce(proc.bootstrap, "r", 1, 20)
    c = member(proc.bootstrap, "rg", "r")
    consume_and_commit(c, 20)
    request = {"mode": "earliest"}
    status, body = api(base, "/groups/rg/offsets/preview", request)
    assert status == 200 and "active member" in body["refused"]
    assert body["partitions"] == [{"topic": "r", "partition": 0, "current": 20, "new": 0}]
    status, body = api(base, "/groups/rg/offsets/reset", request)
    assert status == 409 and "active member" in body["error"]
    c.close()
    wait_for(lambda: group_row(base, "rg")["state"] == "Empty", what="an Empty group")
    status, body = api(base, "/groups/rg/offsets/reset", {"mode": "shift", "value": -5})
    assert status == 200 and body["executed"] and body["partitions"][0]["new"] == 15
    with Admin(proc.bootstrap) as admin:
        assert admin.list_consumer_group_offsets("rg") == {TopicPartition("r", 0): 15}
    _, audit = api(base, "/audit?group=rg")
    results = [(e["dry_run"], e["result"]) for e in audit["entries"]]
    assert results == [(False, "executed"), (False, "refused"), (True, "refused")]
    assert all(e["principal"] == "User:ANONYMOUS" for e in audit["entries"])
    log = (proc.data_dir / "console-audit.log").read_text().splitlines()
    assert [json.loads(line)["result"] for line in log] == ["refused", "refused", "executed"]
    events = api(base, "/groups/rg/history")[1]["events"]
    assert events[-1]["cause"] == "offsets-reset" and events[-1]["detail"]["partitions"] == "1"


def test_changing_actions_are_off_unless_enabled_and_bad_input_is_refused(
        tmp_path: Path) -> None:
    proc = console_broker(tmp_path / "data")
    try:
        base = http_url(proc)
        create_topic(proc.bootstrap, "o", 1)
        with Admin(proc.bootstrap) as admin:
            admin.alter_consumer_group_offsets("og", {TopicPartition("o", 0): 0})
        _, info = api(base, "")
        assert info["version"] == 1 and info["source"] == "broker"
        assert info["features"]["actions"] is False and info["features"]["history"] is True
        status, body = api(base, "/groups/og/offsets/preview", {"mode": "latest"})
        assert status == 200 and body["refused"] is None
        status, body = api(base, "/groups/og/offsets/reset", {"mode": "latest"})
        assert status == 403 and "console.actions.enable" in body["error"]
        assert api(base, "/groups/og/offsets/preview", {"mode": "sideways"})[0] == 400
        assert api(base, "/groups/og/offsets/preview", {"mode": "offset"})[0] == 400
        assert api(base, "/groups/og/offsets/preview", raw=b"{not json")[0] == 400
        assert api(base, "/groups/og/offsets/preview",
                   {"mode": "earliest", "topics": ["nope"]})[0] == 400
        assert api(base, "/groups/nope")[0] == 404
        assert api(base, "/groups/nope/history")[1]["events"] == []
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as resp:
            assert b"samsa_requests" in resp.read()
    finally:
        assert proc.stop() == 0


def test_the_stream_pushes_groups_and_the_watched_group(console: tuple[BrokerProcess, str]
                                                         ) -> None:
    proc, base = console
    with Admin(proc.bootstrap) as admin:
        admin.create_topics({"s": 1})
        admin.alter_consumer_group_offsets("sg", {TopicPartition("s", 0): 0})
    events: dict[str, Any] = {}
    with urllib.request.urlopen(f"{base}/api/v1/stream?group=sg", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        name = None
        for line in resp:
            text = line.decode().strip()
            if text.startswith("event: "):
                name = text[7:]
            elif text.startswith("data: ") and name:
                events[name] = json.loads(text[6:])
            if len(events) == 2:
                break
    assert any(g["group_id"] == "sg" for g in events["groups"]["groups"])
    assert events["group"]["group"]["state"] == "Empty" and events["group"]["lag"] is not None


def test_samsa_console_serves_any_cluster_without_samsa_only_panels(
        console: tuple[BrokerProcess, str], tmp_path: Path) -> None:
    """... and answers 502 with the client's error once the cluster is gone."""
    proc, _ = console
    create_topic(proc.bootstrap, "k", 1)
    produce(proc.bootstrap, "k", 1, 10)
    c = member(proc.bootstrap, "kg", "k")
    consume_and_commit(c, 4)
    closed = False
    try:
        with remote_console(proc.bootstrap, tmp_path / "audit.log") as base:
            _, info = api(base, "")
            assert info["source"] == "cluster"
            assert not info["features"]["history"] and not info["features"]["health"]
            row = wait_for(lambda: (r := group_row(base, "kg")) and r["lag"]["verdict"] and r,
                           what="the group with lag")
            assert (row["group_type"], row["state"], row["members"]) == ("classic", "Stable", 1)
            assert row["lag"]["records"] == 10 - c.committed([_tp("k")])[0].offset
            assert row["lag"]["seconds"] > 0
            status, body = api(base, "/groups/kg")
            assert status == 200 and body["group"]["members"][0]["client_id"] == "api-test"
            assert api(base, "/groups/kg/history")[0] == 404
            assert api(base, "/health")[0] == 404
            status, body = api(base, "/groups/kg/offsets/preview", {"mode": "earliest"})
            assert status == 200 and body["refused"]
            c.close()
            closed = True
            assert proc.stop() == 0
            status, body = api(base, "/groups/kg")
            assert status == 502 and body["error"], body
    finally:
        if not closed:
            c.close()


def _tp(topic: str) -> Any:
    from confluent_kafka import TopicPartition as CkTp

    return CkTp(topic, 0)


def test_the_history_survives_a_broker_restart(tmp_path: Path) -> None:
    proc = console_broker(tmp_path / "data")
    try:
        create_topic(proc.bootstrap, "h", 1)
        from samsa.client import Consumer as SamsaConsumer  # it sends KIP-800 join reasons

        c = SamsaConsumer("h", bootstrap_servers=proc.bootstrap, group_id="hg",
                          session_timeout_ms=6000)
        wait_for(lambda: c.poll(100) is not None and (r := group_row(http_url(proc), "hg"))
                 and r["state"] == "Stable", what="a Stable group")
        c.close()
        before = wait_for(lambda: len(e := api(http_url(proc), "/groups/hg/history")[1][
            "events"]) == 2 and e, what="two events")
        assert proc.stop() == 0
        proc.start()
        base = http_url(proc, starts=2)
        events = api(base, "/groups/hg/history")[1]["events"]
        assert events[:2] == before
        assert events[0]["reason"] == "member id required"  # the client's JoinGroup reason
        loaded = events[2]
        assert loaded["cause"] == "coordinator-loaded" and not loaded["bump"]
        assert loaded["reason"] == "shard loaded from its log"
        assert int(loaded["detail"]["load_ms"]) >= 0
    finally:
        proc.stop()


def test_cluster_health_lists_group_and_transaction_coordinator_shards(
        tmp_path: Path, pg_dsn: str) -> None:
    """A cluster node's health names the lease of every coordinator shard, of the group
    coordinator (``__consumer_offsets``) and of the transaction coordinator
    (``__transaction_state``) alike, with the owner and epoch the database holds (another
    node's too), and lists the shards of both it holds (a transaction shard with its
    transactional ids); its metrics count the transaction shards it holds apart from
    partitions."""
    from samsa.broker.topics import OFFSETS_TOPIC, TRANSACTION_TOPIC
    from samsa.coordinator.hashing import partition_for
    from tests.cluster.nodes import ClusterNodeProcess, all_owned, leases, wait_until
    from tests.cluster.test_pg_event_loop import find_txn_coordinator
    from tests.security.test_authorization import scrape

    nodes: list[ClusterNodeProcess] = []
    try:
        for i in (1, 2):
            node = ClusterNodeProcess(tmp_path, i, pg_dsn,
                                      {"transaction.state.log.num.partitions": "3"})
            node.extra_args += ["--metrics-port", "0"]
            nodes.append(node.start())
        find_txn_coordinator(nodes[0].bootstrap)  # creates __transaction_state
        wait_until(lambda: all_owned(pg_dsn, {1, 2}), 30, "every lease held")
        base = http_url(nodes[0])
        kinds = {OFFSETS_TOPIC: "GROUP", TRANSACTION_TOPIC: "TRANSACTION"}

        def shown() -> dict[tuple[str, int], tuple[str, int | None, int]]:
            _, health = api(base, "/health")
            return {(x["topic"], x["partition"]): (x["type"], x["owner"], x["epoch"])
                    for x in health["cluster"]["coordinator_leases"]}

        def held() -> dict[tuple[str, int], tuple[str, int | None, int]]:
            return {k: (kinds[k[0]], owner, epoch)
                    for k, (owner, epoch) in leases(pg_dsn).items() if k[0] in kinds}

        wait_until(lambda: shown() == held(), 20, "the health naming every shard's lease")
        assert sorted(k for k in shown() if k[0] == TRANSACTION_TOPIC) == [
            (TRANSACTION_TOPIC, i) for i in range(3)]
        assert len(shown()) == 6 + 3
        assert {owner for _, owner, _ in shown().values()} == {1, 2}

        producer = Producer({"bootstrap.servers": nodes[0].bootstrap,
                             "transactional.id": "console-tx"})
        producer.init_transactions(30)
        urls = [base, http_url(nodes[1])]

        def txn_shards() -> dict[tuple[int, int], tuple[str, int]]:
            """(node, shard) -> (status, transactional ids) of each node's own."""
            return {(node, s["partition"]): (s["status"], s["groups"])
                    for node, url in enumerate(urls, 1)
                    for s in api(url, "/health")[1]["shards"] if s["type"] == "TRANSACTION"}

        owners = {(owner, i) for (topic, i), (owner, _) in leases(pg_dsn).items()
                  if topic == TRANSACTION_TOPIC}
        wait_until(lambda: set(txn_shards()) == owners, 20, "each node listing its txn shards")
        tid_shard = partition_for("console-tx", 3)
        assert txn_shards() == {
            (node, i): ("active", 1 if i == tid_shard else 0) for node, i in owners}

        def counted(kind: str) -> float:
            return sum(scrape(n)[("samsa_cluster_leases", frozenset({("kind", kind)}))]
                       for n in nodes)

        wait_until(lambda: (counted("coordinator_shard"), counted("transaction_coordinator_shard"),
                            counted("partition")) == (6, 3, 0), 20, "the lease gauges adding up")
    finally:
        for n in nodes:
            n.kill()
