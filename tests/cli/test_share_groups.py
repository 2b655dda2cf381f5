"""``samsa groups list / describe`` and ``samsa.Admin.describe_groups`` on a share group
(KIP-932, ShareGroupDescribe): its type, epochs, members and assignments; no committed
offsets are asked for (a share group has none)."""

from __future__ import annotations

from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, make_topic, parse_table
from tests.conformance.groupkit import unique
from tests.conformance.sharekit import share_consumer, wait_assigned


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
