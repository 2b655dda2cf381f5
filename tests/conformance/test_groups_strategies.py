"""confluent-kafka groups with range, roundrobin and cooperative-sticky: members join and
leave while records flow; every record is consumed, commits reach the end offsets, and no
partition is ever held by two live members."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    committed,
    create_topic,
    drain,
    end_offsets,
    poll_all,
    produce,
    settle,
    tps_of,
    unique,
)

pytestmark = pytest.mark.conformance

PARTS = 6


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_members_join_and_leave(broker: BrokerProcess, strategy: str) -> None:
    topic, group = unique(f"gs-{strategy}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    expected = produce(broker.bootstrap, topic, PARTS, 10, "a")
    log = OwnershipLog()

    def member(name: str) -> Member:
        return Member(broker.bootstrap, group, name, log,
                      **{"partition.assignment.strategy": strategy}).subscribe([topic])

    a, b = member("a"), member("b")
    members = [a, b]
    try:
        settle(members, every, counts=[3, 3])
        c = member("c")
        members.append(c)
        settle(members, every, counts=[2, 2, 2])
        expected |= produce(broker.bootstrap, topic, PARTS, 10, "b")
        poll_all(members, rounds=5)
        for m in members:
            m.commit()

        b.close()  # graceful: LeaveGroup
        live = [a, c]
        settle(live, every, counts=[3, 3])
        expected |= produce(broker.bootstrap, topic, PARTS, 10, "c")

        drain(live, end_offsets(broker.bootstrap, topic, PARTS))
        assert {v for m in members for v in m.seen} == expected
        for m in live:
            assert m.commit()
        assert committed(broker.bootstrap, group, every) == end_offsets(
            broker.bootstrap, topic, PARTS)
        assert log.violations == []
        # Cooperative rebalancing moves only what must move: a member that stays never
        # gives up everything it holds (eager strategies revoke all on every rebalance).
        if strategy == "cooperative-sticky":
            held: set[tuple[str, int]] = set()
            for _, name, kind, tps in log.events:
                if name != "a":
                    continue
                if kind == "assign":
                    held |= set(tps)
                else:
                    assert set(tps) < held, f"a revoked all it held: {tps}"
                    held -= set(tps)
        assert not [e for m in members for e in m.errors if e.fatal()]
    finally:
        for m in members:
            m.close()
