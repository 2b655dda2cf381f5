"""Helpers of the share-group (KIP-932) conformance tests: a broker with short locks and
sessions, group configs through confluent-kafka's admin client, polling share consumers
(confluent-kafka's ``ShareConsumer``) round-robin from one thread, and a member holding
records in known states (:func:`hold_records`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.types import GroupId

from samsa.protocol.api_keys import ApiKey
from tests.wire import call_once

#: short share-group settings for tests (lock 2 s, session 6 s, heartbeat 0.5 s), with the
#: lower bounds Kafka checks them against lowered to allow them
SHARE_BROKER_CONFIG = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.delivery.count.limit": "3",
}


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs on the GROUP resource (Kafka 4.x group configs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(15)


def describe(bootstrap: str, group: str) -> Any:
    """The group as ShareGroupDescribe v1 answers it (over the wire)."""
    answer = call_once(bootstrap, ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False))
    return answer.groups[0]


def wait_assigned(bootstrap: str, group: str, members: int, timeout: float = 60.0) -> None:
    """Until the group has ``members`` members, each with an assignment at the group's
    assignment epoch (records produced after it spread over every member)."""
    def ready() -> bool:
        g = describe(bootstrap, group)
        return (len(g.members) == members and all(
            m.assignment.topic_partitions and m.member_epoch == g.assignment_epoch
            for m in g.members))

    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{group} never had {members} assigned members")
        time.sleep(0.1)


@dataclass
class Share:
    """One share consumer and what it received: (partition, offset, value, delivery count)."""

    name: str
    consumer: ShareConsumer
    got: list[tuple[int, int, bytes, int]] = field(default_factory=list)
    #: every message the last non-empty poll returned
    last: list[Message] = field(default_factory=list)
    closed: bool = False

    def poll(self, timeout: float = 0.2) -> list[Message]:
        out = []
        for m in self.consumer.poll(timeout) or []:
            if m is None or m.error():
                continue
            out.append(m)
            self.got.append((m.partition(), m.offset(), m.value(), m.delivery_count()))
        if out:
            self.last = out
        return out

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def share_consumer(bootstrap: str, group: str, topics: Iterable[str], name: str,
                   **config: str) -> Share:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "client.id": name, **config})
    consumer.subscribe(list(topics))
    return Share(name, consumer)


def poll_until(shares: list[Share], done: Callable[[], bool], timeout: float = 30.0,
               on_message: Callable[[Share, Message], None] | None = None) -> None:
    """Poll every open consumer in turn until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("timed out polling share consumers")
        for s in shares:
            if s.closed:
                continue
            for m in s.poll(0.1):
                if on_message is not None:
                    on_message(s, m)


def hold_records(bootstrap: str, group: str, topic: str) -> tuple[Share, list[Message]]:
    """A member (explicit mode) that acquired the 10 records of a one-partition topic:
    0-3 accepted, 4-5 released, 6-7 rejected, 8-9 still held. SPSO is then 4, the
    in-flight window 4-9 (2 available, 2 archived, 2 acquired) and the lag 4."""
    from confluent_kafka import AcknowledgeType

    a = share_consumer(bootstrap, group, [topic], "a",
                       **{"share.acknowledgement.mode": "explicit"})
    got: list[Message] = []
    poll_until([a], lambda: len(got) == 10, on_message=lambda s, m: got.append(m))
    acks = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
    for m in got:
        if m.offset() < 8:
            a.consumer.acknowledge(m, acks[0 if m.offset() < 4 else 1 if m.offset() < 6 else 2])
    a.consumer.commit_sync(10)
    return a, got
