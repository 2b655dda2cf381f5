"""Share groups (KIP-932) with Apache Kafka's Java ``KafkaShareConsumer`` 4.3 (driver
``tests/conformance/java/ShareMember.java``) over TCP: three members on two partitions all
get records and each record is delivered once (implicit mode); in explicit mode a member
that RELEASEs every first delivery sees each record again with delivery count 2, and one
that REJECTs never sees a record again; a read_committed group never delivers aborted
records. One JVM per member, short locks (2 s)."""

from __future__ import annotations

from collections import Counter
from typing import Any
from unittest.mock import ANY

import pytest
from confluent_kafka import Producer

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, produce, unique, wait_until
from tests.conformance.javakit import Driver, JavaKit
from tests.conformance.sharekit import set_group_configs, wait_assigned

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

FAST = {"reconnect.backoff.max.ms": "200", "retry.backoff.max.ms": "300"}


def _records(d: Driver) -> list[list[Any]]:
    return [r for e in d.of("records") for r in e["records"]]


def _member(java: JavaKit, broker: BrokerProcess, group: str, topic: str, name: str,
            *settings: str) -> Driver:
    args = [f"{k}={v}" for k, v in {**FAST, "client.id": name}.items()]
    return java.start("ShareMember", broker.bootstrap, group, topic, *args, *settings, name=name)


def _setup(broker: BrokerProcess, partitions: int, per_partition: int = 0) -> tuple[
        str, str, set[str]]:
    topic, group = unique("jq"), unique("jg")
    create_topic(broker.bootstrap, topic, partitions)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    values = {v.decode() for v in produce(broker.bootstrap, topic, partitions, per_partition)}
    return topic, group, values


def test_more_members_than_partitions_get_each_record_once(share_broker: BrokerProcess,
                                                           java: JavaKit) -> None:
    topic, group, _ = _setup(share_broker, 2)
    members = [_member(java, share_broker, group, topic, f"j{i}", "max.poll.records=5")
               for i in range(3)]
    wait_assigned(share_broker.bootstrap, group, 3)
    # batches of 5: whole batches are acquired (KIP-1206's batch-optimized mode)
    values = {v.decode() for v in produce(share_broker.bootstrap, topic, 2, 40,
                                          **{"batch.num.messages": 5})}

    def seen() -> Counter[str]:
        return Counter(r[2] for m in members for r in _records(m))

    wait_until(lambda: set(seen()) >= values, timeout=60, what="every record")
    for m in members:
        assert m.close() == 0
    counts = seen()
    assert set(counts) == values and max(counts.values()) == 1
    assert all(_records(m) for m in members), [len(_records(m)) for m in members]
    assert not [e for m in members for e in m.of("error")]


@pytest.mark.parametrize("first", ["release", "reject"])
def test_explicit_release_redelivers_and_reject_archives(share_broker: BrokerProcess,
                                                          java: JavaKit, first: str) -> None:
    topic, group, values = _setup(share_broker, 1, 4)
    m = _member(java, share_broker, group, topic, "explicit",
                "share.acknowledgement.mode=explicit", f"driver.first={first}")
    wait_until(lambda: {r[2] for r in _records(m)} >= values, timeout=60, what="first pass")
    if first == "release":
        wait_until(lambda: Counter(r[2] for r in _records(m)) == Counter(
            {v: 2 for v in values}), timeout=30, what="redelivery")
        assert sorted(r[3] for r in _records(m)) == [1] * 4 + [2] * 4
    else:
        wait_until(lambda: len(m.of("committed")) >= 1, timeout=30, what="the commit")
        java_wait = 3.0  # past the 2 s lock: a rejected record must not come back
        with pytest.raises(AssertionError):
            wait_until(lambda: len(_records(m)) > len(values), timeout=java_wait)
        assert [r[3] for r in _records(m)] == [1] * 4
    assert m.close() == 0
    assert not m.of("error")


def test_java_admin_lists_and_describes_share_groups(share_broker: BrokerProcess,
                                                      java: JavaKit) -> None:
    """Admin.listGroups(forShareGroups) and Admin.describeShareGroups (ShareGroupDescribe
    v1) see a share group's members, epochs and assignments; a group that does not exist is
    not found; Admin.listShareGroupOffsets (DescribeShareGroupOffsets v1) gives each
    partition's start offset and lag; alterShareGroupOffsets and deleteShareGroupOffsets
    change them once the group is empty; alterShareGroupOffsets creates a missing group."""
    topic, group, _ = _setup(share_broker, 2)
    members = [_member(java, share_broker, group, topic, f"a{i}") for i in range(2)]
    wait_assigned(share_broker.bootstrap, group, 2)
    admin = java.start("AdminDriver", share_broker.bootstrap)
    try:
        listed = admin.request("list-share-groups")
        assert listed["ok"], listed
        assert {"group": group, "state": "Stable", "type": "Share", "protocol": "share"} in \
            listed["groups"]
        nope = unique("nope")
        described = admin.request(f"describe-share-groups {group} {nope}")
        assert described["ok"], described
        g = described["groups"][group]
        assert (g["state"], len(g["members"])) == ("Stable", 2)
        assert g["epoch"] == g["assignment_epoch"] == 2
        assert sorted(m["client"] for m in g["members"]) == ["a0", "a1"]
        assert {tuple(tp) for m in g["members"] for tp in m["assignment"]} == {
            (topic, 0), (topic, 1)}
        assert "GroupIdNotFoundException" in described["groups"][nope]["error"]
        busy = admin.request(f"alter-share-offsets {group} {topic}:1=0")["all"]
        assert "GroupNotEmptyException" in busy, busy
        produce(share_broker.bootstrap, topic, 2, 5)
        wait_until(lambda: sum(len(_records(m)) for m in members) == 10, timeout=30,
                   what="the records")
        for m in members:  # implicit mode: closing accepts what the last poll gave
            assert m.close() == 0

        def offsets() -> Any:
            return admin.request(f"list-share-offsets {group}")

        wait_until(lambda: offsets()["offsets"] == {
            f"{topic}:0": {"start": 5, "lag": 0}, f"{topic}:1": {"start": 5, "lag": 0}},
            timeout=15, what="the share offsets")
        produce(share_broker.bootstrap, topic, 2, 3)
        assert offsets()["offsets"][f"{topic}:1"] == {"start": 5, "lag": 3}
        # the group is empty now: offsets may be altered and deleted
        assert admin.request(f"alter-share-offsets {group} {topic}:1=2") == {
            "reply": "alter-share-offsets", "ok": True, "all": None, "ts": ANY}
        assert offsets()["offsets"][f"{topic}:1"] == {"start": 2, "lag": 6}
        assert admin.request(f"delete-share-offsets {group} {topic}")["all"] is None
        assert offsets()["offsets"] == {}
        # altering a group that does not exist creates it, empty, as Kafka does
        fresh = unique("fresh")
        assert admin.request(f"alter-share-offsets {fresh} {topic}:0=1")["all"] is None
        made = admin.request(f"describe-share-groups {fresh}")["groups"][fresh]
        assert (made["state"], made["members"]) == ("Empty", []), made
        assert admin.request(f"list-share-offsets {fresh}")["offsets"] == {
            f"{topic}:0": {"start": 1, "lag": 7}}
        assert {"group": fresh, "state": "Empty", "type": "Share", "protocol": "share"} in \
            admin.request("list-share-groups")["groups"]
    finally:
        admin.close()
        for m in members:
            m.close()


def test_read_committed_member_never_gets_aborted_records(share_broker: BrokerProcess,
                                                          java: JavaKit) -> None:
    """``share.isolation.level=read_committed``: a librdkafka transactional producer
    commits a transaction and aborts one; the Java member gets the committed records once
    and never the aborted ones (it acknowledges the transaction markers as gaps)."""
    topic, group = unique("jq"), unique("jg")
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_configs(share_broker.bootstrap, group, {
        "share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
    txn = Producer({"bootstrap.servers": share_broker.bootstrap,
                    "transactional.id": unique("tid")})
    txn.init_transactions(15)
    for prefix, commit in (("aborted", False), ("ok", True), ("aborted-too", False)):
        txn.begin_transaction()
        for i in range(3):
            txn.produce(topic, f"{prefix}{i}".encode(), partition=0)
        txn.flush(15)
        if commit:
            txn.commit_transaction(15)
        else:
            txn.abort_transaction(15)
    produce(share_broker.bootstrap, topic, 1, 2, tag="plain")
    m = _member(java, share_broker, group, topic, "rc")
    expected = {f"ok{i}" for i in range(3)} | {f"{topic}/0/plain{i}" for i in range(2)}
    wait_until(lambda: {r[2] for r in _records(m)} >= expected, timeout=60, what="records")
    assert m.close() == 0
    assert Counter(r[2] for r in _records(m)) == Counter(expected)
    assert not m.of("error")
