"""``samsa topics`` against a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samsa.cli.main import main
from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, parse_table, produce, unique


def test_topic_lifecycle(cli: CLI, admin: Admin, broker: BrokerProcess) -> None:
    name = unique("topic")
    r = cli("topics", "create", name, "--partitions", "2", "--config", "retention.ms=60000")
    assert r.rc == 0, r.err
    assert f"Created topic {name}" in r.out
    assert admin.list_topics()[name] == 2

    rows = {row["TOPIC"]: row for row in parse_table(cli("topics", "list").out)}
    assert rows[name]["PARTITIONS"] == "2"
    listed = {t["topic"]: t["partitions"] for t in cli("topics", "list", "-o", "json").json()}
    assert listed[name] == 2
    assert "__consumer_offsets" not in listed

    produce(broker.bootstrap, name, {0: 3, 1: 5})
    info = cli("topics", "describe", name, "-o", "json").json()
    ends = {p["partition"]: p["log_end_offset"] for p in info["partitions"]}
    assert ends == {0: 3, 1: 5}
    assert [p["leader"] for p in info["partitions"]] == [0, 0]
    assert info["configs"]["retention.ms"] == {"value": "60000", "source": "topic"}
    assert info["configs"]["cleanup.policy"]["source"] == "default"
    table = cli("topics", "describe", name).out
    parts = parse_table(table)
    assert [(p["PARTITION"], p["LOG-END-OFFSET"], p["RECORDS"]) for p in parts] == \
        [("0", "3", "3"), ("1", "5", "5")]

    r = cli("topics", "add-partitions", name, "--partitions", "4")
    assert r.rc == 0, r.err
    assert admin.list_topics()[name] == 4
    assert len(cli("topics", "describe", name, "-o", "json").json()["partitions"]) == 4

    r = cli("topics", "delete", name, "-o", "json")
    assert r.rc == 0 and r.json() == {"topic": name, "deleted": True}
    assert name not in admin.list_topics()


def test_topic_errors(cli: CLI, admin: Admin) -> None:
    name = unique("topic")
    assert cli("topics", "create", name, "--partitions", "1").rc == 0
    r = cli("topics", "create", name, "--partitions", "1")
    assert r.rc == 1 and "topic_already_exists" in r.err and r.err.endswith("\n")
    assert r.err.count("\n") == 1
    r = cli("topics", "create", unique("t"), "--partitions", "1", "--config", "nonsense")
    assert r.rc == 2 and "KEY=VALUE" in r.err
    r = cli("topics", "create", unique("t"), "--partitions", "0")
    assert r.rc == 2
    r = cli("topics", "add-partitions", name, "--partitions", "1")
    assert r.rc == 1 and "invalid_partitions" in r.err
    missing = unique("missing")
    for argv in (("describe", missing), ("delete", missing)):
        r = cli("topics", *argv)
        assert r.rc == 1 and "unknown_topic_or_partition" in r.err, r.err
    assert missing not in admin.list_topics()


def test_create_takes_the_brokers_default_partition_count(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Without ``--partitions`` the topic gets the broker's ``num.partitions``, as
    kafka-topics.sh --create does."""
    proc = BrokerProcess(tmp_path / "data", {"num.partitions": "3"}).start()
    try:
        name = unique("dflt")
        assert main(["topics", "create", name, "-o", "json",
                     "--bootstrap-server", proc.bootstrap]) == 0
        assert json.loads(capsys.readouterr().out)["partitions"] == 3
        with Admin(proc.bootstrap) as admin:
            assert admin.list_topics()[name] == 3
    finally:
        proc.stop()
