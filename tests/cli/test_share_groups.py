"""Share groups (KIP-932) from the command line: ``samsa groups list / describe`` and
``samsa.Admin.describe_groups`` on a share group (its type, epochs, members and
assignments; no committed offsets are asked for: a share group has none), and
``samsa share-groups`` (list, describe with start offsets, lag and the record counts of
the broker's metrics, reset-offsets, delete) with confluent-kafka's ``ShareConsumer``."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa import TopicPartition
from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, Run, commit, make_topic, parse_table
from tests.conformance.groupkit import create_topic, produce, unique, wait_until
from tests.conformance.sharekit import (
    SHARE_BROKER_CONFIG,
    hold_records,
    poll_until,
    set_group_configs,
    share_consumer,
    wait_assigned,
)
from tests.console.conftest import http_url


def test_describe_a_share_group(cli: CLI, admin: Admin, broker: BrokerProcess) -> None:
    topic, group = make_topic(admin, 2), unique("shg")
    member = share_consumer(broker.bootstrap, group, [topic], "c1")
    try:
        for _ in range(100):  # the consumer joins while it polls
            member.poll(0.2)
            try:
                wait_assigned(broker.bootstrap, group, 1, timeout=0)
                break
            except AssertionError:
                continue
        else:
            raise AssertionError("the share consumer never got an assignment")
        desc = admin.describe_groups([group])[group]
        assert (desc.group_type, desc.state, desc.protocol) == ("share", "Stable", "simple")
        assert desc.group_epoch == desc.assignment_epoch == 1
        (m,) = desc.members
        assert (m.client_id, m.member_epoch, m.topics) == ("c1", 1, (topic,))
        assert sorted((tp.topic, tp.partition) for tp in m.assignment) == [(topic, 0),
                                                                           (topic, 1)]
        r = cli("groups", "describe", group, "--state")
        assert r.rc == 0, r.err
        (row,) = parse_table(r.out)
        assert (row["STATE"], row["TYPE"]) == ("Stable", "share")
        rows = cli("groups", "describe", group, "-o", "json").json()
        assert [(p["partition"], p["current_offset"], p["client_id"])
                for p in rows] == [(0, None, "c1"), (1, None, "c1")]
        members = cli("groups", "describe", group, "--members", "-o", "json").json()
        assert [(m["client_id"], m["member_epoch"]) for m in members] == [("c1", 1)]
        assert any(g["group"] == group for g in cli("groups", "list", "-o", "json").json())
    finally:
        member.close()


# ---- samsa share-groups ------------------------------------------------------------------


@pytest.fixture(scope="module")
def share_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess,
                                                                               str]]:
    """A share-group broker (short sessions) with its metrics endpoint."""
    proc = BrokerProcess(tmp_path_factory.mktemp("share-cli") / "data", SHARE_BROKER_CONFIG,
                         extra_args=["--metrics-port", "0"]).start()
    try:
        yield proc, http_url(proc) + "/metrics"
    finally:
        assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(body) for s in f.samples}


def test_share_groups_commands(cli: CLI, share_metrics: tuple[BrokerProcess, str]) -> None:
    """list, describe (offsets with the record counts from the metrics endpoint, members,
    state), reset-offsets and delete against a group with a member holding records and once
    it is gone; the refusals while it has a member change nothing."""
    broker, metrics_url = share_metrics
    topic, dlq, group = unique("sq"), unique("dlq"), unique("sg")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dlq, 1)
    set_group_configs(broker.bootstrap, group, {
        "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "60000",
        "errors.deadletterqueue.topic.name": dlq})
    produce(broker.bootstrap, topic, 1, 10)

    def run(*argv: str) -> Run:
        return cli("share-groups", *argv, bootstrap=broker.bootstrap)

    a, _ = hold_records(broker.bootstrap, group, topic)
    try:
        wanted = {"start_offset": 4, "lag": 4, "in_flight": 6, "acquired": 2, "archived": 2}

        def offsets() -> list[dict[str, Any]]:
            r = run("describe", group, "--metrics-url", metrics_url, "-o", "json")
            assert r.rc == 0, r.err
            rows: list[dict[str, Any]] = r.json()
            return rows

        deadline = time.monotonic() + 20
        while [{k: row[k] for k in wanted} for row in offsets()] != [wanted]:
            assert time.monotonic() < deadline, str(offsets())
            time.sleep(0.1)
        table = parse_table(run("describe", group, "--metrics-url", metrics_url).out)
        assert [(r["TOPIC"], r["START-OFFSET"], r["LAG"], r["IN-FLIGHT"], r["ACQUIRED"],
                 r["ARCHIVED"]) for r in table] == [(topic, "4", "4", "6", "2", "2")]
        assert [(g["group"], g["state"]) for g in run("list", "-o", "json").json()
                if g["group"] == group] == [(group, "Stable")]
        (m,) = run("describe", group, "--members", "-o", "json").json()
        assert (m["client_id"], m["assignment"]) == ("a", [[topic, 0]])
        (state,) = parse_table(run("describe", group, "--state", "--verbose").out)
        assert (state["STATE"], state["#MEMBERS"], state["GROUP-EPOCH"]) == ("Stable", "1", "1")
        samples = _scrape(metrics_url)
        assert samples[("samsa_share_records_archived_total", frozenset())] == 2
        assert samples[("samsa_share_dead_letters_total", frozenset())] == 2
        assert samples[("samsa_share_records_released_total", frozenset())] == 2
        assert samples[("samsa_share_sessions", frozenset())] == 1
        labels = frozenset({"group": group, "topic": topic, "partition": "0"}.items())
        assert samples[("samsa_share_group_lag", labels)] == 4

        refused = run("reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                      "--execute")
        assert refused.rc == 1 and "active member" in refused.err, refused
        refused = run("delete", group)
        assert refused.rc == 1 and "not empty" in refused.err, refused
        assert [r["start_offset"] for r in offsets()] == [4]  # nothing changed
    finally:
        a.close()
    wait_until(lambda: run("describe", group, "--state", "-o", "json").json()["state"]
               == "Empty", what="the group empty")
    # the closed member's records were released
    assert _scrape(metrics_url)[("samsa_share_records_released_total", frozenset())] == 4

    plan = run("reset-offsets", "--group", group, "--all-topics", "--to-offset", "2")
    assert plan.rc == 0 and "Dry run" in plan.err
    assert [(r["START-OFFSET"], r["NEW-OFFSET"]) for r in parse_table(plan.out)] == [("4", "2")]
    assert [(r["start_offset"], r["lag"]) for r in offsets()] == [(4, 4)]
    assert run("reset-offsets", "--group", group, "--topic", topic, "--to-offset", "2",
               "--execute").rc == 0
    assert [(r["start_offset"], r["lag"]) for r in offsets()] == [(2, 8)]
    assert run("reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-latest",
               "--execute").rc == 0
    assert [(r["start_offset"], r["lag"]) for r in offsets()] == [(10, 0)]
    assert run("reset-offsets", "--group", group, "--topic", topic, "--to-datetime",
               "2000-01-01T00:00:00Z", "--execute").rc == 0
    assert [r["start_offset"] for r in offsets()] == [0]

    deleted = run("delete", group)
    assert deleted.rc == 0, deleted.err
    assert group not in {g["group"] for g in run("list", "-o", "json").json()}
    gone = run("describe", group)
    assert gone.rc == 1 and "does not exist" in gone.err

    # a share group that does not exist yet gets its start offsets, as with Kafka's tool
    fresh = unique("sg")
    assert run("reset-offsets", "--group", fresh, "--topic", topic, "--to-offset", "7",
               "--execute").rc == 0
    labels = frozenset({"group": fresh, "topic": topic, "partition": "0"}.items())
    assert _scrape(metrics_url)[("samsa_share_partition_start_offset", labels)] == 7
    # ... and exists from then on, empty, as Kafka creates it (listed, described, offsets)
    assert [g["state"] for g in run("list", "-o", "json").json()
            if g["group"] == fresh] == ["Empty"]
    assert run("describe", fresh, "--state", "-o", "json").json()["state"] == "Empty"
    described = run("describe", fresh, "-o", "json")
    assert described.rc == 0, described.err
    assert [(r["topic"], r["start_offset"]) for r in described.json()] == [(topic, 7)]
    # --all-groups: every share group's rows, as kafka-share-groups.sh --describe --all-groups
    every = run("describe", "--all-groups", "-o", "json")
    assert every.rc == 0, every.err
    assert [(r["topic"], r["start_offset"]) for r in every.json()
            if r["group"] == fresh] == [(topic, 7)]
    states = run("describe", "--all-groups", "--state", "-o", "json").json()
    assert {"group": fresh, "state": "Empty", "members": 0} in [
        {k: g[k] for k in ("group", "state", "members")} for g in states]


def test_share_metrics_count_lock_expiries(share_metrics: tuple[BrokerProcess, str]) -> None:
    """Records a member acquires and never acknowledges come back when their lock (2 s)
    expires: one lock expiry, three records released, the share partition's records
    available again; an open share session is counted; another member's acquisition of
    them counts three redeliveries."""
    broker, metrics_url = share_metrics
    topic, group = unique("sq"), unique("sg")
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, topic, 1, 3)
    before = _scrape(metrics_url)
    holder = share_consumer(broker.bootstrap, group, [topic], "holder",
                            **{"share.acknowledgement.mode": "explicit"})
    try:
        poll_until([holder], lambda: len(holder.got) == 3)
        labels = {"group": group, "topic": topic, "partition": "0"}

        def count(name: str, state: str | None = None) -> float:
            key = frozenset({**labels, **({"state": state} if state else {})}.items())
            return _scrape(metrics_url).get((name, key), -1)

        assert count("samsa_share_partition_records", "acquired") == 3
        assert _scrape(metrics_url)[("samsa_share_sessions", frozenset())] >= 1
        wait_until(lambda: count("samsa_share_partition_records", "available") == 3,
                   what="the expired lock's records available again")
        after = _scrape(metrics_url)

        def delta(name: str) -> float:
            key = (name, frozenset())
            return after[key] - before.get(key, 0)

        assert (delta("samsa_share_lock_expiries_total"),
                delta("samsa_share_records_released_total"),
                delta("samsa_share_records_redelivered_total")) == (1, 3, 0)
        assert count("samsa_share_partition_records", "acquired") == 0
        # another member acquires them again: three redeliveries (delivery count 2)
        again = share_consumer(broker.bootstrap, group, [topic], "again")
        try:
            poll_until([again], lambda: len(again.got) == 3)
            assert {n for *_, n in again.got} == {2}
            key = ("samsa_share_records_redelivered_total", frozenset())
            assert _scrape(metrics_url)[key] - before.get(key, 0) == 3
        finally:
            again.close()
    finally:
        holder.close()


def test_share_groups_bad_input(cli: CLI, broker: BrokerProcess, admin: Admin) -> None:
    """Bad options and groups that are not share groups: a one-line message, a non-zero
    exit status, nothing changed."""
    topic, group = make_topic(admin, 1), unique("cg")
    commit(admin, group, {(topic, 0): 1})  # a classic group with an offset
    for argv, code, text in [
            (("describe", group), 1, "not a share group"),
            (("describe", unique("nope"), "--members"), 1, "does not exist"),
            (("delete", group), 1, "not a share group"),
            (("reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
              "--execute"), 1, "not a share group"),
            (("reset-offsets", "--group", group, "--topic", topic), 2, "--to-"),
            (("reset-offsets", "--group", group, "--topic", topic, "--to-offset", "-3"), 2,
             "at least 0"),
            (("reset-offsets", "--group", group, "--topic", topic, "--to-datetime",
              "yesterday"), 2, "ISO-8601"),
            (("list", "--state", "Rebalancing"), 2, "unknown share group state"),
            (("describe", group, "--members", "--state"), 2, "not allowed"),
            (("describe", group, "--all-groups"), 2, "not allowed"),
            (("describe", "--members"), 2, "required")]:
        r = cli("share-groups", *argv)
        assert r.rc == code and text in r.err and r.err.count("\n") == 1, (argv, r)
    assert group not in {g["group"] for g in cli("share-groups", "list", "-o", "json").json()}
    assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 1}
    assert admin.describe_groups([group])[group].group_type == "classic"
