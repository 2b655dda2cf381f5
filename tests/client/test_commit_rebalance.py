"""Commits made just before a rebalance carry the member's generation and id, so they land."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from samsa import TopicPartition
from samsa.client import Admin, Consumer, Producer
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.groups import all_tps, describe, make, split_ok
from tests.client.runner import Recorder, Runner

pytestmark = pytest.mark.slow

RECORDS, MORE = 200, 20


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(start, start + n):
            p.send(topic, value=b"%d" % i, partition=i % 4)


class CommitOnRevoke(Recorder):
    """Commits the consumed positions in ``on_partitions_revoked``, as applications do."""

    consumer: Consumer

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        super().on_partitions_revoked(revoked)
        self.consumer.commit()


def end_offsets(admin: Admin, topic: str) -> dict[TopicPartition, int]:
    found = admin.list_offsets(dict.fromkeys(all_tps(topic, 4), "latest"))
    return {tp: offset for tp, (offset, _) in found.items()}


def second_member_joins(broker: BrokerProcess, admin: Admin, topic: str, group: str,
                        runners: list[Runner], first: Runner, second: Runner) -> None:
    """``first`` consumes everything, ``second`` joins; then each new record is read once."""
    runners.append(first)
    first.start()
    wait_until(lambda: len(first.records) == RECORDS and first.stable(),
               describe=lambda: describe([first]))
    runners.append(second)
    second.start()
    wait_until(lambda: split_ok(runners, all_tps(topic, 4)), describe=lambda: describe(runners))
    assert first.error is None and second.error is None
    assert admin.list_consumer_group_offsets(group) == end_offsets(admin, topic)
    produce(broker.bootstrap, topic, RECORDS, MORE)
    wait_until(lambda: len(first.records) + len(second.records) >= RECORDS + MORE,
               describe=lambda: describe(runners))
    first.stop()  # no more rebalances may happen before the counts below are taken
    second.stop()
    values = [r.value for r in first.records + second.records]
    assert sorted(values) == sorted(b"%d" % i for i in range(RECORDS + MORE)), \
        f"records read twice: {len(values) - len(set(values))}"
    assert first.error is None and second.error is None


def test_static_members_with_auto_commit_survive_a_rebalance(
        broker: BrokerProcess, admin: Admin, topic: Callable[[int], str], group: str,
        runners: list[Runner]) -> None:
    t = topic(4)
    produce(broker.bootstrap, t, 0, RECORDS)
    a = Runner(make(broker, group, group_instance_id="a", auto_commit_interval_ms=600_000),
               [t])
    b = Runner(make(broker, group, group_instance_id="b", auto_commit_interval_ms=600_000),
               [t])
    second_member_joins(broker, admin, t, group, runners, a, b)


@pytest.mark.parametrize(("how", "strategy"), [
    ("auto-commit", "range"), ("commit-on-revoke", "range"),
    ("auto-commit", "cooperative-sticky")])
def test_dynamic_members_read_each_record_once(
        broker: BrokerProcess, admin: Admin, topic: Callable[[int], str], group: str,
        runners: list[Runner], how: str, strategy: str) -> None:
    t = topic(4)
    produce(broker.bootstrap, t, 0, RECORDS)
    kw: dict[str, Any] = {"partition_assignment_strategy": [strategy],
                          "auto_commit_interval_ms": 600_000,
                          "enable_auto_commit": how == "auto-commit"}
    first_consumer = make(broker, group, **kw)
    listener = None
    if how == "commit-on-revoke":
        listener = CommitOnRevoke()
        listener.consumer = first_consumer
    first = Runner(first_consumer, [t], listener=listener)
    second = Runner(make(broker, group, **kw), [t])
    second_member_joins(broker, admin, t, group, runners, first, second)
