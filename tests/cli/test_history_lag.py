"""``samsa groups history`` (read from the group's ``__consumer_offsets`` partition) and
``samsa groups lag`` against the session broker."""

from __future__ import annotations

import json

from samsa.client import Admin

from .conftest import CLI, Member, commit, make_topic, produce, unique


def test_history_shows_each_rebalance_with_its_cause_and_phases(cli: CLI, admin: Admin,
                                                                 broker: object) -> None:
    topic = make_topic(admin, 2)
    group = unique("hist")
    for name in ("first", "second"):  # joins, then leaves: the group goes Empty each time
        Member(broker.bootstrap, group, [topic], client_id=name).close()  # type: ignore[attr-defined]
    r = cli("groups", "history", group, "-o", "json")
    assert r.rc == 0, r.err
    events = r.json()
    causes = [e["cause"] for e in events]
    assert causes == ["member-joined", "member-left", "member-joined", "member-left"]
    assert all(e["bump"] and e["epoch_after"] > e["epoch_before"] for e in events)
    assert [e["epoch_after"] for e in events] == sorted(e["epoch_after"] for e in events)
    assert events[-1]["outcome"] == "empty"
    text = cli("groups", "history", group)
    assert text.rc == 0 and "member-joined" in text.out and "held up by" in text.out
    assert "PreparingRebalance" in text.out and "CompletingRebalance" in text.out
    assert len(cli("groups", "history", group, "--last", "1", "-o", "json").json()) == 1
    none = cli("groups", "history", unique("nobody"))
    assert none.rc == 0 and "No rebalance history" in none.out


def test_lag_in_records_and_seconds_watched(cli: CLI, admin: Admin, broker: object) -> None:
    topic = make_topic(admin, 2)
    group = unique("lag")
    produce(broker.bootstrap, topic, {0: 10, 1: 4},  # type: ignore[attr-defined]
            timestamps=lambda p, i: 1_000_000 + i)
    commit(admin, group, {(topic, 0): 6, (topic, 1): 4})
    r = cli("groups", "lag", group, "-o", "json")
    assert r.rc == 0, r.err
    snap = r.json()
    by_part = {p["partition"]: p for p in snap["partitions"]}
    assert (by_part[0]["lag_records"], by_part[1]["lag_records"]) == (4, 0)
    assert by_part[0]["lag_seconds"] > 1_000_000  # the first unconsumed record is that old
    assert by_part[1]["lag_seconds"] == 0
    watched = cli("groups", "lag", group, "--watch", "--iterations", "2", "--interval", "0.1",
                  "-o", "json")
    lines = [json.loads(line) for line in watched.out.splitlines()]
    assert len(lines) == 2 and all(s["lag_records"] == 4 for s in lines)
    assert {s["verdict"] for s in lines} <= {"OK", "STOP"}
    table = cli("groups", "lag", group)
    assert table.rc == 0 and "LAG-SECONDS" in table.out and "VERDICT" in table.out
    missing = cli("groups", "lag", unique("none"))
    assert missing.rc == 1 and "no committed offsets" in missing.err
