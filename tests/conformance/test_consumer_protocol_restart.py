"""A KIP-848 ``consumer`` group across a broker restart (clean stop and kill -9): the group
is reloaded from ``__consumer_offsets`` with its epochs, members and assignments; members
that stayed up carry on with the same member ids and partitions, without a revocation;
records produced afterwards are consumed and the commits equal the end offsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import RESTART_CONFIG, CpMember, fatal_errors
from tests.conformance.groupkit import (
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
    wait_until,
)

pytestmark = pytest.mark.conformance

@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", RESTART_CONFIG)
    yield proc
    proc.kill()


def _describe(bootstrap: str, group: str) -> tuple[int, int, dict[str, tuple[int, set[int]]]]:
    """Group epoch, assignment epoch and member id -> (member epoch, partitions), raw."""
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
    from kio.schema.types import GroupId

    from tests.wire import WireClient

    c = WireClient(bootstrap)
    try:
        resp = c.call(69, 0, ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group),), include_authorized_operations=False))
    finally:
        c.close()
    (g,) = resp.groups
    assert int(g.error_code) == 0, g
    return int(g.group_epoch), int(g.assignment_epoch), {
        m.member_id: (int(m.member_epoch),
                      {int(p) for t in m.assignment.topic_partitions for p in t.partitions})
        for m in g.members}


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_group_survives_restart(broker: BrokerProcess, how: str) -> None:
    broker.start()
    bootstrap = broker.bootstrap
    topic, group = unique("cpr"), unique("g")
    create_topic(bootstrap, topic, 4)
    every = tps_of(topic, 4)
    expected = produce(bootstrap, topic, 4, 5, "a")
    log = OwnershipLog()
    a = CpMember(bootstrap, group, "a", log).subscribe([topic])
    b = CpMember(bootstrap, group, "b", log).subscribe([topic])
    members = [a, b]
    try:
        settle(members, every, counts=[2, 2])
        drain(members, end_offsets(bootstrap, topic, 4))
        assert a.commit() and b.commit()
        wait_until(lambda: (poll_all(members), _stable(bootstrap, group))[1],
                   what="a stable group")
        before = _describe(bootstrap, group)
        held = {m.name: m.assignment() for m in members}
        callbacks = {m.name: log.callbacks(m.name) for m in members}

        if how == "stop":
            assert broker.stop() == 0
        else:
            broker.kill()
        broker.start()
        assert _describe(bootstrap, group) == before, "the reloaded group differs"

        expected |= produce(bootstrap, topic, 4, 5, "b")
        ends = end_offsets(bootstrap, topic, 4)
        drain(members, ends, timeout=45)
        wait_until(lambda: (poll_all(members), expected <= {v for m in members
                                                             for v in m.seen})[1],
                   what="every record consumed")
        for m in members:
            assert m.commit()
        assert committed(bootstrap, group, ends) == ends
        assert {m.name: m.assignment() for m in members} == held
        assert {m.name: log.callbacks(m.name) for m in members} == callbacks, \
            "a member saw a rebalance across the restart"
        after = _describe(bootstrap, group)
        assert after[2].keys() == before[2].keys()
        assert log.violations == []
        assert [e for m in members for e in fatal_errors(m.errors)] == []
    finally:
        for m in members:
            m.close()


def _stable(bootstrap: str, group: str) -> bool:
    """Every member at the group's target assignment epoch."""
    epoch, target, members = _describe(bootstrap, group)
    return epoch == target and all(e == target for e, _ in members.values())
