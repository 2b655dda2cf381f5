"""Helpers for tests of consumer groups: consumers with fast timeouts, split checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from samsa import TopicPartition
from samsa.client import Admin, Consumer
from samsa.client.group.context import MemberStatus
from tests.brokerproc import BrokerProcess
from tests.client.runner import Runner


def make(broker: BrokerProcess, group: str, **kw: Any) -> Consumer:
    config: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap, "group_id": group,
        "auto_offset_reset": "earliest", "session_timeout_ms": 3000,
        "heartbeat_interval_ms": 200, "max_poll_interval_ms": 10000,
        "metadata_max_age_ms": 500}
    config.update(kw)
    return Consumer(**config)


def status(consumer: Consumer) -> MemberStatus:
    """The group status of a consumer with a group_id."""
    got = consumer.group_status()
    assert got is not None
    return got


def split_ok(runners: Sequence[Runner], partitions: set[TopicPartition]) -> bool:
    """Every partition owned by exactly one stable runner."""
    if not all(r.stable() for r in runners):
        return False
    owned = [tp for r in runners for tp in r.assignment]
    return len(owned) == len(set(owned)) and set(owned) == partitions


def describe(runners: Sequence[Runner]) -> list[Any]:
    """Member states (and the coordinator's view) for failure messages."""
    out: list[Any] = []
    if runners:
        c = runners[0].consumer
        with Admin(bootstrap_servers=c.config["bootstrap_servers"]) as admin:
            group = c.config["group_id"]
            g = admin.describe_groups([group])[group]
            out.append((g.state, [(m.member_id[-6:], m.client_id, sorted(m.assignment))
                                  for m in g.members]))
    for r in runners:
        s = status(r.consumer)
        out.append({"member": s.member_id[-6:], "state": s.state, "gen": s.generation,
                    "assignment": sorted(r.assignment), "error": repr(r.error),
                    "history": s.history[-8:],
                    "coordinator": s.coordinator,
                    "hb_in_flight": s.heartbeat_in_flight,
                    "since_hb_ok": s.since_heartbeat_ok_ms,
                    "hb_thread": s.heartbeat_thread_alive,
                    "net_thread": r.consumer.network_alive,
                    "runner_alive": r.is_alive()})
    return out


def all_tps(topic: str, n: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(n)}
