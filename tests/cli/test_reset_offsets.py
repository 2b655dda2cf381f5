"""``samsa groups reset-offsets`` in every mode, dry run vs execute, export, refusal."""

from __future__ import annotations

import csv
import io
import time

import pytest

from samsa import TopicPartition
from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, Member, commit, make_topic, parse_table, produce, unique

HOUR_MS = 3_600_000


@pytest.fixture
def setup(admin: Admin, broker: BrokerProcess) -> tuple[str, str, int]:
    """A topic of 3 partitions x 10 records (record i of each is 10-i hours old) and an
    empty group with committed offsets 4 (p0) and 8 (p1), none for p2."""
    topic = make_topic(admin, 3)
    now = int(time.time() * 1000)
    produce(broker.bootstrap, topic, {0: 10, 1: 10, 2: 10},
            timestamps=lambda p, i: now - (10 - i) * HOUR_MS)
    group = unique("g")
    commit(admin, group, {(topic, 0): 4, (topic, 1): 8})
    return topic, group, now


def plan(cli: CLI, group: str, *argv: str) -> dict[int, tuple[int | None, int]]:
    r = cli("groups", "reset-offsets", "--group", group, *argv, "-o", "json")
    assert r.rc == 0, r.err
    return {row["partition"]: (row["current_offset"], row["new_offset"]) for row in r.json()}


def committed(admin: Admin, group: str, topic: str) -> dict[int, int]:
    return {tp.partition: o for tp, o in admin.list_consumer_group_offsets(group).items()
            if tp.topic == topic}


def test_every_mode_as_dry_run(cli: CLI, admin: Admin, setup: tuple[str, str, int]) -> None:
    topic, group, now = setup
    t = ("--topic", topic)
    assert plan(cli, group, *t, "--to-earliest") == {0: (4, 0), 1: (8, 0), 2: (None, 0)}
    assert plan(cli, group, *t, "--to-latest") == {0: (4, 10), 1: (8, 10), 2: (None, 10)}
    # no committed offset: current means latest, as in Kafka
    assert plan(cli, group, *t, "--to-current") == {0: (4, 4), 1: (8, 8), 2: (None, 10)}
    assert plan(cli, group, *t, "--to-offset", "6") == {0: (4, 6), 1: (8, 6), 2: (None, 6)}
    assert plan(cli, group, *t, "--to-offset", "99") == {0: (4, 10), 1: (8, 10), 2: (None, 10)}
    assert plan(cli, group, f"--topic={topic}:0,1", "--shift-by", "-5") == {0: (4, 0),
                                                                           1: (8, 3)}
    assert plan(cli, group, f"--topic={topic}:0,1", "--shift-by", "3") == {0: (4, 7),
                                                                          1: (8, 10)}
    # record i is 10-i hours old: 5h30m back is record 5, 3h back record 7
    assert plan(cli, group, *t, "--by-duration", "PT5H30M") == {0: (4, 5), 1: (8, 5),
                                                               2: (None, 5)}
    when = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime((now - 3 * HOUR_MS) / 1000))
    assert plan(cli, group, *t, "--to-datetime", when) == {0: (4, 7), 1: (8, 7), 2: (None, 7)}
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now / 1000 + 3600))
    assert plan(cli, group, *t, "--to-datetime", future) == {0: (4, 10), 1: (8, 10),
                                                            2: (None, 10)}
    assert plan(cli, group, "--all-topics", "--to-earliest") == {0: (4, 0), 1: (8, 0)}
    # a dry run (explicit or not) changes nothing
    assert plan(cli, group, *t, "--to-earliest", "--dry-run")[0] == (4, 0)
    assert committed(admin, group, topic) == {0: 4, 1: 8}


def test_table_export_and_execute(cli: CLI, admin: Admin, setup: tuple[str, str, int]) -> None:
    topic, group, _ = setup
    r = cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--shift-by", "1",
            "--topic", topic)  # the same topic twice is one set of partitions
    assert r.rc == 1 and "cannot shift" in r.err and f"{topic}:2" in r.err
    r = cli("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:1",
            "--to-offset", "2")
    assert r.rc == 0 and "Dry run" in r.err
    assert parse_table(r.out) == [{"GROUP": group, "TOPIC": topic, "PARTITION": "1",
                                   "CURRENT-OFFSET": "8", "NEW-OFFSET": "2"}]
    r = cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "2",
            "--export")
    assert list(csv.reader(io.StringIO(r.out))) == [[topic, "0", "2"], [topic, "1", "2"],
                                                    [topic, "2", "2"]]
    assert committed(admin, group, topic) == {0: 4, 1: 8}
    r = cli("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0,2",
            "--to-offset", "2", "--execute", "--export")
    assert r.rc == 0 and "Dry run" not in r.err
    assert r.out.splitlines() == [f"{topic},0,2", f"{topic},2,2"]
    assert committed(admin, group, topic) == {0: 2, 1: 8, 2: 2}
    r = cli("groups", "reset-offsets", "--group", group, "--all-topics", "--to-latest",
            "--execute")
    assert r.rc == 0
    assert committed(admin, group, topic) == {0: 10, 1: 10, 2: 10}
    # lag after the reset, through describe
    rows = cli("groups", "describe", group, "-o", "json").json()
    assert {r["partition"]: r["lag"] for r in rows} == {0: 0, 1: 0, 2: 0}


def test_refused_while_group_is_active(cli: CLI, admin: Admin, broker: BrokerProcess) -> None:
    topic = make_topic(admin, 1)
    produce(broker.bootstrap, topic, {0: 3})
    group = unique("g")
    member = Member(broker.bootstrap, group, [topic])
    try:
        member.commit({(topic, 0): 2})
        for extra in ([], ["--execute"]):
            r = cli("groups", "reset-offsets", "--group", group, "--topic", topic,
                    "--to-earliest", *extra)
            assert r.rc == 1, r.out
            assert "1 active member(s)" in r.err and "Stable" in r.err
            assert r.out == ""
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 2}
    finally:
        member.close()
    r = cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
            "--execute")
    assert r.rc == 0, r.err
    assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 0}


def test_bad_arguments(cli: CLI, setup: tuple[str, str, int]) -> None:
    topic, group, _ = setup
    base = ["groups", "reset-offsets", "--group", group]
    cases = [
        ([*base, "--topic", topic], 2, "one of the arguments"),  # no mode
        ([*base, "--to-earliest"], 2, "one of the arguments"),  # no scope
        ([*base, "--topic", topic, "--all-topics", "--to-earliest"], 2, "not allowed"),
        ([*base, "--topic", topic, "--to-earliest", "--to-latest"], 2, "not allowed"),
        ([*base, "--topic", topic, "--to-earliest", "--dry-run", "--execute"], 2, "not allowed"),
        ([*base, "--topic", topic, "--by-duration", "30m"], 2, "PnDTnHnMnS"),
        ([*base, "--topic", topic, "--by-duration", "P"], 2, "PnDTnHnMnS"),
        ([*base, "--topic", topic, "--to-datetime", "yesterday"], 2, "ISO-8601"),
        ([*base, "--topic", f"{topic}:x", "--to-earliest"], 2, "bad partition list"),
        ([*base, "--topic", f"{topic}:5", "--to-earliest"], 1, "no partition 5"),
        ([*base, "--topic", unique("nope"), "--to-earliest"], 1, "does not exist"),
        (["groups", "reset-offsets", "--group", unique("g"), "--all-topics", "--to-earliest"],
         1, "no committed offsets"),
    ]
    for argv, rc, message in cases:
        r = cli(*argv)
        assert r.rc == rc and message in r.err, (argv, r.rc, r.err)
