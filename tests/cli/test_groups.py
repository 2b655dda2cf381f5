"""``samsa groups list/describe/delete/delete-offsets/watch`` with real group members."""

from __future__ import annotations

import json

from samsa import TopicPartition
from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, Member, commit, make_topic, parse_table, produce, unique


def test_describe_lag_members_and_state(cli: CLI, admin: Admin, broker: BrokerProcess) -> None:
    topic = make_topic(admin, 3)
    produce(broker.bootstrap, topic, {0: 10, 1: 7, 2: 4})
    group = unique("g")
    member = Member(broker.bootstrap, group, [topic], client_id="lag-checker")
    try:
        member.commit({(topic, 0): 3, (topic, 1): 7})  # partition 2: nothing committed
        rows = cli("groups", "describe", group, "-o", "json").json()
        by_part = {r["partition"]: r for r in rows}
        assert sorted(by_part) == [0, 1, 2]
        for p, (current, end) in {0: (3, 10), 1: (7, 7), 2: (None, 4)}.items():
            row = by_part[p]
            assert (row["current_offset"], row["log_end_offset"]) == (current, end)
            assert row["lag"] == (None if current is None else end - current)
            assert row["topic"] == topic and row["group"] == group
            assert row["client_id"] == "lag-checker"
            assert row["consumer_id"].startswith("lag-checker")
            assert row["host"].startswith("/127.0.0.1")
        table = {r["PARTITION"]: r for r in parse_table(cli("groups", "describe", group).out)}
        assert (table["0"]["CURRENT-OFFSET"], table["0"]["LOG-END-OFFSET"],
                table["0"]["LAG"]) == ("3", "10", "7")
        assert (table["2"]["CURRENT-OFFSET"], table["2"]["LAG"]) == ("-", "-")
        assert table["1"]["CLIENT-ID"] == "lag-checker"

        members = cli("groups", "describe", group, "--members", "--verbose", "-o", "json").json()
        assert len(members) == 1
        assert members[0]["partitions"] == 3 and members[0]["topics"] == [topic]
        assert members[0]["assignment"] == [[topic, 0], [topic, 1], [topic, 2]]
        mrows = parse_table(cli("groups", "describe", group, "--members", "--verbose").out)
        assert mrows[0]["#PARTITIONS"] == "3"
        assert mrows[0]["ASSIGNMENT"] == f"{topic}(0,1,2)"
        assert "ASSIGNMENT" not in parse_table(cli("groups", "describe", group,
                                                   "--members").out)[0]

        state = cli("groups", "describe", group, "--state", "-o", "json").json()
        assert state["state"] == "Stable" and state["members"] == 1
        assert state["protocol_type"] == "consumer"
        assert state["assignment_strategy"] == "range"
        assert state["coordinator"] == f"{broker.bootstrap} (0)"
        srow = parse_table(cli("groups", "describe", group, "--state").out)[0]
        assert (srow["STATE"], srow["#MEMBERS"]) == ("Stable", "1")

        stable = {g["group"] for g in cli("groups", "list", "--state", "stable", "-o",
                                          "json").json()}
        assert group in stable
        empty = {g["group"] for g in cli("groups", "list", "--state", "Empty", "-o",
                                         "json").json()}
        assert group not in empty
        listed = {r["GROUP"]: r["STATE"] for r in parse_table(cli("groups", "list").out)}
        assert listed[group] == "Stable"

        watch = cli("groups", "watch", group, "--iterations", "2", "--interval", "0.1",
                    "-o", "json")
        frames = [json.loads(ln) for ln in watch.out.splitlines()]
        assert len(frames) == 2
        assert frames[-1]["state"] == "Stable" and frames[-1]["total_lag"] == 7
        text = cli("groups", "watch", group, "--iterations", "1").out
        assert f"GROUP {group}  STATE Stable" in text and "TOTAL-LAG 7" in text

        r = cli("groups", "delete", group)
        assert r.rc == 1 and "non_empty_group" in r.err
    finally:
        member.close()
    assert cli("groups", "describe", group, "-o", "json").json()[0]["consumer_id"] is None
    r = cli("groups", "describe", group, "--members")
    assert r.rc == 0 and "has no active members" in r.out
    r = cli("groups", "delete", group)
    assert r.rc == 0, r.err
    r = cli("groups", "describe", group)
    assert r.rc == 1 and r.err == f"samsa: group {group} does not exist\n"


def test_delete_offsets(cli: CLI, admin: Admin) -> None:
    t1, t2 = make_topic(admin, 2), make_topic(admin, 1)
    group = unique("g")
    commit(admin, group, {(t1, 0): 0, (t1, 1): 0, (t2, 0): 0})
    r = cli("groups", "delete-offsets", group, "--topic", t1, "-o", "json")
    assert r.rc == 0, r.err
    assert r.json() == [{"topic": t1, "partition": p, "status": "deleted"} for p in (0, 1)]
    assert admin.list_consumer_group_offsets(group) == {TopicPartition(t2, 0): 0}
    r = cli("groups", "delete-offsets", group, "--topic", unique("missing"))
    assert r.rc == 1 and "does not exist" in r.err


def test_unknown_group_and_bad_state(cli: CLI) -> None:
    for argv in (("describe", "no-such-group"), ("describe", "no-such-group", "--state"),
                 ("watch", "no-such-group", "--iterations", "1")):
        r = cli("groups", *argv)
        assert r.rc == 1 and r.err == "samsa: group no-such-group does not exist\n", r.err
    r = cli("groups", "delete", "no-such-group")
    assert r.rc == 1 and "group_id_not_found" in r.err
    r = cli("groups", "list", "--state", "sleepy")
    assert r.rc == 2 and "unknown state" in r.err


def test_list_accepts_consumer_group_states(cli: CLI) -> None:
    """KIP-848 consumer groups have states classic groups lack: ``--state`` takes them too."""
    for state in ("Assigning", "reconciling"):
        r = cli("groups", "list", "--state", state, "-o", "json")
        assert r.rc == 0, r.err
        assert all(g["state"] == state.capitalize() for g in r.json())
    r = cli("groups", "list", "--state", "sleepy")
    assert "Assigning" in r.err and "Reconciling" in r.err
