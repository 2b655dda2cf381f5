"""``samsa groups plan``: what-if assignments, counts and moves."""

from __future__ import annotations

from typing import Any

from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, Member, make_topic, parse_table, unique


def run_plan(cli: CLI, *argv: str, broker: bool = False) -> dict[str, Any]:
    r = cli("groups", "plan", *argv, "-o", "json", bootstrap=broker)
    assert r.rc == 0, r.err
    result: dict[str, Any] = r.json()
    owners: dict[tuple[str, int], str] = {}
    for m in result["members"]:
        assert m["after"] == len(m["partitions"])
        for t, p in m["partitions"]:
            assert (t, p) not in owners, "a partition assigned twice"
            owners[(t, p)] = m["member"]
    assert len(owners) == result["total_partitions"] == sum(result["topics"].values())
    return result


def counts(result: dict[str, Any], key: str = "after") -> dict[str, int]:
    return {m["member"]: m[key] for m in result["members"]}


def test_plain_assignment_moves_nothing(cli: CLI) -> None:
    result = run_plan(cli, "--strategy", "range", "--topic", "a:6", "--members", "3")
    assert counts(result) == {"member-1": 2, "member-2": 2, "member-3": 2}
    assert result["moves"] == [] and result["rebalances"] == 1
    assert [m["partitions"] for m in result["members"]] == [
        [["a", 0], ["a", 1]], [["a", 2], ["a", 3]], [["a", 4], ["a", 5]]]


def test_adding_a_member(cli: CLI) -> None:
    sticky = run_plan(cli, "--strategy", "sticky", "--topic", "a:6", "--topic", "b:4",
                      "--members", "3", "--add-member", "m4")
    assert counts(sticky, "before") == {"m4": 0, "member-1": 4, "member-2": 3, "member-3": 3}
    assert sorted(counts(sticky).values()) == [2, 2, 3, 3]
    assert len(sticky["moves"]) == 2 and all(mv["to"] == "m4" for mv in sticky["moves"])
    cooperative = run_plan(cli, "--strategy", "cooperative-sticky", "--topic", "a:6",
                           "--members", "3", "--add-member", "m4")
    assert cooperative["rebalances"] == 2  # revoke, then assign
    assert counts(cooperative)["m4"] == 1 and len(cooperative["moves"]) == 1
    # range reshuffles: most partitions change owner
    ranged = run_plan(cli, "--strategy", "range", "--topic", "a:6", "--members", "3",
                      "--add-member", "m4")
    assert len(ranged["moves"]) > len(cooperative["moves"])
    # switching strategies: baseline from --current-strategy
    switch = run_plan(cli, "--strategy", "roundrobin", "--current-strategy", "range",
                      "--topic", "a:4", "--members", "2")
    assert [(mv["partition"], mv["from"], mv["to"]) for mv in switch["moves"]] == [
        (1, "member-1", "member-2"), (2, "member-2", "member-1")]


def test_removing_a_member_and_explicit_subscriptions(cli: CLI) -> None:
    result = run_plan(cli, "--strategy", "sticky", "--topic", "a:3", "--topic", "b:3",
                      "--member", "x=a", "--member", "y=a,b", "--member", "z=b",
                      "--remove-member", "y")
    assert counts(result, "before") == {"x": 2, "y": 2, "z": 2}
    assert counts(result) == {"x": 3, "y": 0, "z": 3}
    assert {(mv["from"], mv["to"]) for mv in result["moves"]} == {("y", "x"), ("y", "z")}
    r = cli("groups", "plan", "--strategy", "sticky", "--topic", "a:3", "--members", "2",
            "--add-member", "m3", bootstrap=False)
    rows = {row["MEMBER"]: row for row in parse_table(r.out)}
    assert rows["m3"]["BEFORE"] == "0" and rows["m3"]["AFTER"] == "1"
    assert "1 of 3 partition(s) would move" in r.out


def test_live_group(cli: CLI, admin: Admin, broker: BrokerProcess) -> None:
    topic = make_topic(admin, 4)
    group = unique("g")
    member = Member(broker.bootstrap, group, [topic])
    try:
        result = run_plan(cli, "--group", group, "--add-member", "newcomer", broker=True)
        assert result["strategy"] == "range"  # the group's own strategy
        assert result["topics"] == {topic: 4}
        old = next(m for m in result["members"] if m["member"] != "newcomer")
        assert old["before"] == 4 and old["after"] == 2 and old["topics"] == [topic]
        assert counts(result)["newcomer"] == 2
        assert len(result["moves"]) == 2
    finally:
        member.close()
    r = cli("groups", "plan", "--group", group)
    assert r.rc == 1 and "has no members" in r.err


def test_plan_errors(cli: CLI) -> None:
    cases = [
        (["--topic", "a:3"], 2, "no members"),
        (["--topic", "a:x", "--members", "2"], 2, "bad partition count"),
        (["--topic", "a:3", "--members", "2", "--remove-member", "zz"], 1, "no member zz"),
        (["--topic", "a:3", "--member", "m=", "--member", "n"], 2, "subscribes to no topic"),
        (["--strategy", "nonsense", "--topic", "a:3", "--members", "1"], 2, "unknown strategy"),
    ]
    for argv, rc, message in cases:
        r = cli("groups", "plan", *argv, bootstrap=False)
        assert r.rc == rc and message in r.err, (argv, r.err)
    r = cli("groups", "plan", "--topic", unique("missing"), "--members", "2")
    assert r.rc == 1 and "does not exist" in r.err
