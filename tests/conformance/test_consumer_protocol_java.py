"""KIP-848 ``consumer`` groups with Apache Kafka's Java consumer 4.3 (``group.protocol=
consumer``, driver ``ConsumerProtocolMember``): members join, leave (close) and die (SIGKILL
of the JVM) while records flow; a static member comes back to its partitions; a broker-side
RE2 pattern (``SubscriptionPattern``) picks up a new topic; partitions added to the topic are
assigned; the broker is SIGKILLed and restarted under a live group. After every change the
members split the partitions exactly, no partition is assigned while another live member still
holds it, every record is consumed and the commits equal the end offsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import (
    BROKER_CONFIG,
    RESTART_CONFIG,
    JavaCpMember,
    double_owners,
)
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
from tests.conformance.javakit import JavaKit, tps

pytestmark = pytest.mark.conformance


def _consumed(members: list[JavaCpMember]) -> set[str]:
    return {v for m in members for v in m.values()}


def test_members_join_leave_and_die(cp_broker: BrokerProcess, java: JavaKit) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("jcp"), unique("g")
    create_topic(bootstrap, topic, 6)
    every = tps_of(topic, 6)
    expected = {v.decode() for v in produce(bootstrap, topic, 6, 5, "a")}

    def member(name: str) -> JavaCpMember:
        return JavaCpMember(java, bootstrap, group, topic, name)

    a, b = member("a"), member("b")
    settle([a, b], every, counts=[3, 3])
    c = member("c")
    settle([a, b, c], every, counts=[2, 2, 2])
    expected |= {v.decode() for v in produce(bootstrap, topic, 6, 5, "b")}
    a_before_leave = a.assignment()
    b.close()  # leaves with epoch -1
    settle([a, c], every, counts=[3, 3])
    a_before_kill = a.assignment()
    c.kill()  # evicted after group.consumer.session.timeout.ms
    settle([a], every, counts=[6])
    expected |= {v.decode() for v in produce(bootstrap, topic, 6, 5, "c")}

    members = [a, b, c]
    wait_until(lambda: expected <= _consumed(members), what="every record consumed")
    assert double_owners(members) == []
    ends = end_offsets(bootstrap, topic, 6)
    wait_until(lambda: a.commit()["ok"] and committed(bootstrap, group, ends) == ends,
               what="a's commit to reach the end offsets")
    assert a.errors() == []
    # Incremental: a gives up only what moves (never all it holds), and nothing when
    # members leave or die.
    for e in a.rebalances():
        if e["event"] != "assigned" and e["partitions"]:
            assert tps(e["partitions"]) < tps(e["assignment"]), e
    assert a_before_leave <= a_before_kill <= a.assignment()
    a.close()


def test_static_member_returns(cp_broker: BrokerProcess, java: JavaKit) -> None:
    """close() of a static member leaves with epoch -2: its partitions wait for the same
    instance id, which gets them back with no rebalance for the others. A replacement that
    comes while the old member is still in the group (SIGKILLed, session not expired) is
    refused with UNRELEASED_INSTANCE_ID, fatal for the Java client, as with Kafka."""
    bootstrap = cp_broker.bootstrap
    topic, group = unique("jcs"), unique("g")
    create_topic(bootstrap, topic, 4)
    every = tps_of(topic, 4)

    def member(name: str, instance: str) -> JavaCpMember:
        return JavaCpMember(java, bootstrap, group, topic, name,
                            **{"group.instance.id": instance})

    a, b = member("a", "inst-a"), member("b", "inst-b")
    settle([a, b], every, counts=[2, 2])
    a_parts, b_parts = a.assignment(), b.assignment()
    b_events = len(b.rebalances())
    a.close()
    a2 = member("a2", "inst-a")
    settle([a2, b], every, counts=[2, 2])
    assert a2.assignment() == a_parts
    assert len(b.rebalances()) == b_events, "b saw a rebalance"

    b.kill()
    b2 = member("b2", "inst-b")
    refused = b2.driver.wait_for(lambda e: e["event"] == "error", 30, "b2's error")
    assert refused["error"].startswith("UnreleasedInstanceIdException"), refused
    assert refused.get("fatal") is True
    b2.kill()  # reaps the JVM (it stops polling after a fatal error)
    settle([a2], every, counts=[4], timeout=45)  # b's session expires: a2 takes all
    b3 = member("b3", "inst-b")
    settle([a2, b3], every, counts=[2, 2])
    assert double_owners([a, a2, b, b3]) == []
    assert b_parts  # b held partitions before it was killed
    for m in (a2, b3):
        assert m.errors() == []
        m.close()


def test_pattern_subscription(cp_broker: BrokerProcess, java: JavaKit) -> None:
    bootstrap = cp_broker.bootstrap
    prefix, group = unique("jrx"), unique("g")
    create_topic(bootstrap, f"{prefix}-a", 3)
    create_topic(bootstrap, f"other-{prefix}", 1)
    pattern = f"{prefix}-.*"  # RE2, matched against the whole topic name by the broker
    a = JavaCpMember(java, bootstrap, group, pattern, "a", **{"driver.pattern": "true"})
    b = JavaCpMember(java, bootstrap, group, pattern, "b", **{"driver.pattern": "true"})
    settle([a, b], tps_of(f"{prefix}-a", 3), counts=[1, 2])
    create_topic(bootstrap, f"{prefix}-b", 3)
    settle([a, b], tps_of(f"{prefix}-a", 3) | tps_of(f"{prefix}-b", 3), counts=[3, 3],
           timeout=45)
    expected = {v.decode() for v in produce(bootstrap, f"{prefix}-b", 3, 3)}
    wait_until(lambda: expected <= _consumed([a, b]), what="the new topic's records consumed")
    assert double_owners([a, b]) == []
    for m in (a, b):
        assert m.errors() == []
        m.close()


def test_admin_describes_a_consumer_group(cp_broker: BrokerProcess, java: JavaKit) -> None:
    """The Java Admin (ConsumerGroupDescribe, ListGroups v5) agrees with the members."""
    bootstrap = cp_broker.bootstrap
    topic, group = unique("jcd"), unique("g")
    create_topic(bootstrap, topic, 4)
    every = tps_of(topic, 4)
    a = JavaCpMember(java, bootstrap, group, topic, "a")
    b = JavaCpMember(java, bootstrap, group, topic, "b")
    settle([a, b], every, counts=[2, 2])
    admin = java.start("AdminDriver", bootstrap)
    reply = admin.request(f"describe-groups {group}")
    assert reply["ok"], reply
    desc = reply["groups"][group]
    assert (desc["state"], desc["type"], desc["assignor"], desc["simple"]) == (
        "Stable", "Consumer", "uniform", False)
    held = {m["client"]: tps(m["assignment"]) for m in desc["members"]}
    assert held == {"a": a.assignment(), "b": b.assignment()}
    listing = admin.request("list-groups")
    (mine,) = [g for g in listing["groups"] if g["group"] == group]
    assert (mine["type"], mine["state"]) == ("Consumer", "Stable")
    for m in (a, b):
        m.close()
    admin.close()


def _commit_to_ends(members: list[JavaCpMember], bootstrap: str, group: str,
                    ends: dict[tuple[str, int], int]) -> None:
    """Every member commits its positions until the group's commits equal ``ends``."""
    wait_until(lambda: all(m.commit()["ok"] for m in members)
               and committed(bootstrap, group, ends) == ends,
               what="the members' commits to reach the end offsets")


def test_added_partitions_are_assigned(cp_broker: BrokerProcess, java: JavaKit) -> None:
    """CreatePartitions on the subscribed topic: the broker bumps the group epoch and the
    members get the new partitions, whose records they consume."""
    bootstrap = cp_broker.bootstrap
    topic, group = unique("jcpp"), unique("g")
    create_topic(bootstrap, topic, 2)
    expected = {v.decode() for v in produce(bootstrap, topic, 2, 3, "a")}
    # metadata.max.age.ms: the client learns the new partitions' leaders without waiting 5 min
    a, b = (JavaCpMember(java, bootstrap, group, topic, name, **{"metadata.max.age.ms": "1000"})
            for name in ("a", "b"))
    members = [a, b]
    settle(members, tps_of(topic, 2), counts=[1, 1])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, 6)])[topic].result(15)
    settle(members, tps_of(topic, 6), counts=[3, 3], timeout=45)
    expected |= {v.decode() for v in produce(bootstrap, topic, 6, 3, "b")}
    wait_until(lambda: expected <= _consumed(members), what="every record consumed")
    _commit_to_ends(members, bootstrap, group, end_offsets(bootstrap, topic, 6))
    assert double_owners(members) == []
    for m in members:
        assert m.errors() == []
        m.close()


@pytest.fixture
def restart_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", RESTART_CONFIG)
    yield proc
    proc.kill()


def test_broker_restart_under_a_live_group(restart_broker: BrokerProcess,
                                           java: JavaKit) -> None:
    """kill -9 of the broker and a restart on the same port: the group is reloaded from
    ``__consumer_offsets``, the members carry on with their partitions (no callback: not
    fenced, no rebalance), every record
    (before and after) is consumed and the commits equal the end offsets."""
    broker = restart_broker.start()
    bootstrap = broker.bootstrap
    topic, group = unique("jcr"), unique("g")
    create_topic(bootstrap, topic, 4)
    every = tps_of(topic, 4)
    expected = {v.decode() for v in produce(bootstrap, topic, 4, 5, "a")}
    a, b = (JavaCpMember(java, bootstrap, group, topic, name) for name in ("a", "b"))
    members = [a, b]
    settle(members, every, counts=[2, 2])
    wait_until(lambda: expected <= _consumed(members), what="the first records consumed")
    held = {m.name: m.assignment() for m in members}
    callbacks = {m.name: len(m.rebalances()) for m in members}

    broker.kill()
    broker.start()
    expected |= {v.decode() for v in produce(bootstrap, topic, 4, 5, "b")}
    wait_until(lambda: expected <= _consumed(members), 60, what="every record consumed")
    _commit_to_ends(members, bootstrap, group, end_offsets(bootstrap, topic, 4))
    settle(members, every, counts=[2, 2])
    assert {m.name: m.assignment() for m in members} == held
    assert {m.name: len(m.rebalances()) for m in members} == callbacks, \
        "a member was fenced or saw a rebalance across the restart"
    assert double_owners(members) == []
    for m in members:
        assert [e for e in m.errors() if e.get("fatal")] == []
        m.close()


def test_commits_and_fetches_by_topic_id(tmp_path: Path, java: JavaKit) -> None:
    """The Java 4.3 consumer commits (OffsetCommit v10) and fetches its committed offsets
    (OffsetFetch v10) by topic id once the broker serves v10, as against Kafka 4.1+: a
    proxy that every connection goes through (the broker advertises its port) sees the
    versions on the wire. The commits round-trip: a second member resumes exactly after
    them."""
    from samsa.protocol.api_keys import ApiKey
    from tests.client.proxy import FaultProxy

    proxy = FaultProxy()
    proc = BrokerProcess(tmp_path / "data", {**BROKER_CONFIG,
                                             "advertised.port": str(proxy.port)}).start()
    proxy.start(("127.0.0.1", proc.port))
    members: list[JavaCpMember] = []
    try:
        bootstrap = proxy.address
        topic, group = unique("jid"), unique("g")
        create_topic(bootstrap, topic, 2)
        first = {v.decode() for v in produce(bootstrap, topic, 2, 4, "a")}
        a = JavaCpMember(java, bootstrap, group, topic, "java-a")
        members.append(a)
        settle([a], tps_of(topic, 2), counts=[2])
        wait_until(lambda: first <= _consumed([a]), what="a consumed the first records")
        ends = end_offsets(bootstrap, topic, 2)
        _commit_to_ends([a], bootstrap, group, ends)
        a.close()
        second = {v.decode() for v in produce(bootstrap, topic, 2, 3, "b")}
        b = JavaCpMember(java, bootstrap, group, topic, "java-b")
        members.append(b)
        wait_until(lambda: second <= _consumed([b]), what="b consumed the new records")
        assert set(b.values()) == second  # it started at a's commits, fetched by id

        def versions(api: int, client: str) -> set[int]:
            return {v for (k, v, c), n in proxy.versions.items() if k == api and c == client}

        assert versions(ApiKey.OFFSET_COMMIT, "java-a") == {10}
        assert versions(ApiKey.OFFSET_FETCH, "java-b") == {10}
        assert versions(ApiKey.API_VERSIONS, "java-a") == {4}
        assert a.errors() == [] and b.errors() == []
    finally:
        for m in members:
            if not m.closed:
                m.kill()
        proxy.close()
        assert proc.stop() == 0
