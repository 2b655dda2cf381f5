"""Apache Kafka's Java Admin client on consumer groups: listConsumerGroups,
describeConsumerGroups, deleteConsumerGroups, listConsumerGroupOffsets,
alterConsumerGroupOffsets and deleteConsumerGroupOffsets, on a live group of a Java and a
librdkafka member and on the same group once it is empty; each call's errors are the ones
Kafka gives."""

from __future__ import annotations

from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    create_topic,
    produce,
    settle,
    tps_of,
    unique,
    wait_until,
)
from tests.conformance.javakit import Driver, JavaKit, JavaMember, tps

pytestmark = pytest.mark.conformance

PARTS = 4




def ok(admin: Driver, command: str) -> dict[str, Any]:
    reply = admin.request(command)
    assert reply["ok"], reply
    return reply


def listed(admin: Driver) -> dict[str, str]:
    return {g["group"]: g["state"] for g in ok(admin, "list-groups")["groups"]}


def test_admin_on_a_live_and_an_empty_group(broker: BrokerProcess, java: JavaKit) -> None:
    topic, other, group = unique("jad"), unique("jad-other"), unique("g")
    create_topic(broker.bootstrap, topic, PARTS)
    create_topic(broker.bootstrap, other, 1)
    produce(broker.bootstrap, topic, PARTS, 5)
    every = tps_of(topic, PARTS)
    jm = JavaMember(java, broker.bootstrap, group, [topic], "java-m",
                    **{"partition.assignment.strategy":
                       "org.apache.kafka.clients.consumer.RangeAssignor"})
    rm = Member(broker.bootstrap, group, "rd-m", None,
                **{"partition.assignment.strategy": "range"}).subscribe([topic])
    admin = java.start("AdminDriver", broker.bootstrap)
    try:
        settle([jm, rm], every, counts=[2, 2])
        wait_until(lambda: len(jm.records()) == 5 * len(jm.assignment()),
                   what="the Java member consumed its partitions")
        jm_commit = ok(jm.driver, "commit")  # the Java member's consumed positions
        jm_offsets = {f"{t}:{p}": o for t, p, o in jm_commit["offsets"]}
        assert set(jm_offsets.values()) == {5}

        # The live group, as the Java Admin sees it.
        assert listed(admin)[group] == "Stable"
        desc = ok(admin, f"describe-groups {group}")["groups"][group]
        assert (desc["state"], desc["type"], desc["assignor"], desc["simple"]) == (
            "Stable", "Classic", "range", False)
        members = {m["client"]: tps(m["assignment"]) for m in desc["members"]}
        assert members == {"java-m": jm.assignment(), "rd-m": rm.assignment()}
        offsets = ok(admin, f"list-offsets {group}")["offsets"]
        assert {k: v["offset"] for k, v in offsets.items()} == jm_offsets

        # What Kafka refuses while the group has members.
        alter = ok(admin, f"alter-offsets {group} {topic}:0=1")
        assert alter["errors"][f"{topic}:0"].startswith("UnknownMemberIdException"), alter
        deleted = ok(admin, f"delete-offsets {group} {topic}:0")
        assert deleted["errors"][f"{topic}:0"].startswith(
            "GroupSubscribedToTopicException"), deleted
        refused = ok(admin, f"delete-groups {group}")["errors"][group]
        assert refused.startswith("GroupNotEmptyException"), refused

        jm.close()
        rm.close()
        desc = ok(admin, f"describe-groups {group}")["groups"][group]
        assert (desc["state"], desc["members"]) == ("Empty", [])
        assert listed(admin)[group] == "Empty"

        # An empty group's offsets can be altered and deleted.
        alter = ok(admin, f"alter-offsets {group} {topic}:0=1 {topic}:3=4 {other}:0=0 "
                          f"{topic}:9=1")
        assert alter["errors"] == {f"{topic}:0": None, f"{topic}:3": None, f"{other}:0": None,
                                   f"{topic}:9": alter["errors"][f"{topic}:9"]}
        assert alter["errors"][f"{topic}:9"].startswith("UnknownTopicOrPartitionException")
        offsets = ok(admin, f"list-offsets {group}")["offsets"]
        assert offsets == {**{k: {"offset": v, "metadata": ""} for k, v in jm_offsets.items()},
                           f"{topic}:0": {"offset": 1, "metadata": "by-java-admin"},
                           f"{topic}:3": {"offset": 4, "metadata": "by-java-admin"},
                           f"{other}:0": {"offset": 0, "metadata": "by-java-admin"}}

        deleted = ok(admin, f"delete-offsets {group} {topic}:0 {other}:0 {topic}:9")
        assert deleted["errors"][f"{topic}:0"] is None
        assert deleted["errors"][f"{other}:0"] is None
        # As in Kafka, a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
        assert deleted["errors"][f"{topic}:9"].startswith(
            "UnknownTopicOrPartitionException"), deleted
        offsets = ok(admin, f"list-offsets {group}")["offsets"]
        assert set(offsets) == set(jm_offsets) - {f"{topic}:0"} | {f"{topic}:3"}

        # Deleting groups: the empty one goes, an unknown one is GroupIdNotFound.
        nope = unique("nope")
        errors = ok(admin, f"delete-groups {group} {nope}")["errors"]
        assert errors[group] is None
        assert errors[nope].startswith("GroupIdNotFoundException"), errors
        assert group not in listed(admin)
        assert ok(admin, f"list-offsets {group}")["offsets"] == {}
        gone = ok(admin, f"describe-groups {group}")["groups"][group]
        # Below v6 DescribeGroups answered a group that does not exist as Dead; at v6
        # (KIP-1043, Kafka 4.x) it is GROUP_ID_NOT_FOUND, which Admin 4.3 raises with the
        # message of ConsumerGroupDescribe, which it asked first.
        assert gone["error"] == f"GroupIdNotFoundException: Group {group} not found.", gone
    finally:
        rm.close()
        admin.close()


def test_describe_features(broker: BrokerProcess, java: JavaKit) -> None:
    """Admin.describeFeatures (ApiVersions v4) sees what Kafka 4.3 would report of a broker
    serving consumer and share groups and transactions v2 (KIP-890)."""
    from samsa.client import Admin

    with Admin(broker.bootstrap) as samsa_admin:
        epoch = samsa_admin.describe_features().finalized_epoch
    admin = java.start("AdminDriver", broker.bootstrap)
    try:
        reply = ok(admin, "describe-features")
    finally:
        admin.close()
    assert reply["finalized"] == {"group.version": [1, 1], "share.version": [1, 1],
                                  "transaction.version": [2, 2]}
    assert reply["supported"] == {"group.version": [0, 1], "share.version": [0, 1],
                                  "transaction.version": [0, 2]}
    assert reply["epoch"] == epoch and epoch is not None
