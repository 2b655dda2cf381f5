"""A ConsumerRebalanceListener that commits synchronously in onPartitionsRevoked (Kafka's
at-most-once-per-owner hand-over): the commits land while the rebalance is under way,
equal what the member consumed, and the next owner reads none of those records again."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    committed,
    create_topic,
    end_offsets,
    produce,
    settle,
    tps_of,
    unique,
    wait_until,
)
from tests.conformance.javakit import ASSIGNORS, JavaKit, JavaMember, tps

pytestmark = pytest.mark.conformance

PARTS = 4




@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_commit_in_on_partitions_revoked(broker: BrokerProcess, java: JavaKit,
                                         assignor: str) -> None:
    topic, group = unique(f"jrc-{assignor}"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    every = tps_of(topic, PARTS)
    produce(broker.bootstrap, topic, PARTS, 10, "a")

    def member(name: str) -> JavaMember:
        return JavaMember(java, broker.bootstrap, group, [topic], name, **{
            "partition.assignment.strategy": ASSIGNORS[assignor],
            "driver.commitOnRevoke": "true"})

    def consumed(members: list[JavaMember]) -> Counter[tuple[int, int]]:
        return Counter((r["partition"], r["offset"]) for m in members for r in m.records())

    a = member("a")
    wait_until(lambda: len(a.records()) == 10 * PARTS, what="a consumed everything")
    b = member("b")
    settle([a, b], every, counts=[2, 2])
    # a committed, in onPartitionsRevoked, exactly what it had consumed of what it gave up.
    revoked = {tp for e in a.driver.of("revoked") for tp in tps(e["partitions"])}
    commits = {(t, p): o for e in a.driver.of("committed") for t, p, o in e["offsets"]}
    assert revoked >= every - a.assignment()
    assert commits == {tp: 10 for tp in revoked}
    assert committed(broker.bootstrap, group, revoked) == commits

    produce(broker.bootstrap, topic, PARTS, 10, "b")
    wait_until(lambda: len(consumed([a, b])) == 20 * PARTS, what="a and b consumed the rest")

    b.close()  # b's close() revokes (and commits) before it leaves
    settle([a], every, counts=[PARTS])
    b_commits = {(t, p): o for e in b.driver.of("committed") for t, p, o in e["offsets"]}
    ends = end_offsets(broker.bootstrap, topic, PARTS)
    assert set(b_commits) == tps(b.driver.of("assigned")[-1]["assignment"])
    assert b_commits == {tp: ends[tp] for tp in b_commits}
    produce(broker.bootstrap, topic, PARTS, 5, "c")
    wait_until(lambda: len(consumed([a, b])) == 25 * PARTS, what="a consumed the last records")

    twice = [rec for rec, n in consumed([a, b]).items() if n > 1]
    assert twice == [], f"records read twice: {twice}"
    assert a.errors() == [] and b.errors() == []
    a.close()
