"""Helpers for tests of consumer groups: consumers with fast timeouts, split checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from samsa import TopicPartition
from samsa.client import Admin, Consumer
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
        coord = r.consumer._coordinator
        assert coord is not None
        out.append({"member": r.consumer.member_id[-6:], "state": r.consumer.member_state,
                    "gen": r.consumer.generation,
                    "assignment": sorted(r.assignment), "error": repr(r.error),
                    "history": coord.machine.history[-8:],
                    "coordinator": coord.machine.coordinator,
                    "hb_in_flight": coord.machine.heartbeat_in_flight,
                    "since_hb_ok": coord._now() - coord.machine.last_heartbeat_ok,
                    "hb_thread": coord._hb_thread is not None and coord._hb_thread.is_alive(),
                    "net_thread": r.consumer._net._thread.is_alive(),
                    "runner_alive": r.is_alive()})
    return out


def all_tps(topic: str, n: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(n)}
