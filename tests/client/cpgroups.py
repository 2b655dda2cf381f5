"""Helpers for the tests of ``Consumer(group_protocol="consumer")`` (KIP-848 groups): the
``cp_broker`` and ``cp_topic`` fixtures live in ``tests/client/conftest.py``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from samsa import TopicPartition
from samsa.client import Admin, Consumer, Producer
from tests.brokerproc import BrokerProcess
from tests.client.runner import Recorder, Runner


def cp_consumer(broker: BrokerProcess, group: str, **kw: Any) -> Consumer:
    config: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap, "group_id": group,
        "group_protocol": "consumer", "auto_offset_reset": "earliest",
        "enable_auto_commit": False, "max_poll_interval_ms": 20000,
        "metadata_max_age_ms": 1000}
    config.update(kw)
    return Consumer(**config)


class Timeline(Recorder):
    """A listener recording when each call happened (for ownership intervals)."""

    def __init__(self, name: str, log: list[tuple[float, str, str, frozenset[TopicPartition]]]
                 ) -> None:
        super().__init__()
        self.name = name
        self.log = log

    def _at(self, kind: str, parts: set[TopicPartition]) -> None:
        with self.lock:
            self.log.append((time.monotonic(), self.name, kind, frozenset(parts)))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._at("revoked", revoked)
        super().on_partitions_revoked(revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        super().on_partitions_assigned(assigned)
        self._at("assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self._at("lost", lost)
        super().on_partitions_lost(lost)


def never_two_owners(log: Sequence[tuple[float, str, str, frozenset[TopicPartition]]]) -> None:
    """Replay the listener calls in time order: a partition is assigned to a member only
    when no other member holds it (its owner revoked it first)."""
    holder: dict[TopicPartition, str] = {}
    for _, name, kind, parts in sorted(log, key=lambda e: e[0]):
        for tp in parts:
            if kind == "assigned":
                assert holder.get(tp) in (None, name), f"{tp} assigned to {name} while " \
                                                        f"{holder.get(tp)} holds it"
                holder[tp] = name
            elif holder.get(tp) == name:
                del holder[tp]


def split(runners: Sequence[Runner], parts: set[TopicPartition]) -> bool:
    if not all(r.stable() for r in runners):
        return False
    owned = [tp for r in runners for tp in r.assignment]
    return len(owned) == len(set(owned)) and set(owned) == parts and all(
        r.assignment for r in runners)


def produce(broker: BrokerProcess, topic: str, n: int, tag: str) -> set[bytes]:
    values = {f"{tag}-{i}".encode() for i in range(n)}
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for v in sorted(values):
            p.send(topic, value=v, key=v)
        p.flush(10)
    return values


def commits_equal_end_offsets(broker: BrokerProcess, group: str,
                              parts: set[TopicPartition]) -> bool:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        ends = {tp: o for tp, (o, _) in admin.list_offsets(dict.fromkeys(parts, "latest"))
                .items()}
        return admin.list_consumer_group_offsets(group, parts) == ends


def describe(runners: Sequence[Runner]) -> list[Any]:
    out = []
    for r in runners:
        s = r.consumer.group_status()
        assert s is not None
        out.append((s.state, s.generation, sorted(tp.partition for tp in r.assignment),
                    repr(r.error), s.history[-6:]))
    return out
