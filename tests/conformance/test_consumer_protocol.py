"""KIP-848 ``consumer`` groups with confluent-kafka (librdkafka, ``group.protocol=consumer``):
members join, leave and are SIGKILLed while records flow; a regex subscription picks up a
new topic; a static member comes back to its partitions without moving anyone else's; added
partitions are assigned. After each change the live members split the partitions exactly,
no partition is handed to a member while another still holds it, every record is consumed
and the commits equal the end offsets. The admin APIs see the group's type and epochs."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.brokerproc import BrokerProcess
from tests.conformance.consumer_protocol_kit import BROKER_CONFIG, CpMember, ProcessMember
from tests.conformance.groupkit import (
    Member,
    OwnershipLog,
    Tp,
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


def _values(members: list[CpMember]) -> set[bytes]:
    return {v for m in members for v in m.seen}


def _commit_all(members: list[CpMember], ends: dict[Tp, int], bootstrap: str,
                group: str) -> None:
    """Drain to the end offsets, commit, and check the group's commits equal them."""
    drain(members, ends)
    for m in members:
        if not m.closed:
            assert m.commit()
    assert committed(bootstrap, group, ends) == ends


def test_members_join_leave_and_die(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("cp"), unique("g")
    create_topic(bootstrap, topic, 6)
    every = tps_of(topic, 6)
    expected = produce(bootstrap, topic, 6, 5, "a")
    log = OwnershipLog()

    def member(name: str) -> CpMember:
        return CpMember(bootstrap, group, name, log).subscribe([topic])

    a, b = member("a"), member("b")
    members = [a, b]
    try:
        settle(members, every, counts=[3, 3])
        c = member("c")
        members.append(c)
        settle(members, every, counts=[2, 2, 2])
        expected |= produce(bootstrap, topic, 6, 5, "b")

        b.close()  # leaves with member epoch -1: its partitions move at once
        settle([a, c], every, counts=[3, 3])

        doomed = ProcessMember(bootstrap, group, topic)
        try:
            # The member reconciles incrementally: it may hold one partition before the
            # second is released to it, so wait for its whole share of the uniform split.
            wait_until(lambda: (poll_all([a, c]), len(doomed.holds()) == 2)[1], 30,
                       what="the member process to get its two partitions")
            settle([a, c], every - {(topic, p) for p in doomed.holds()}, counts=[2, 2])
            doomed.kill()  # SIGKILL: evicted after group.consumer.session.timeout.ms
        finally:
            doomed.kill()
        settle([a, c], every, counts=[3, 3])
        expected |= produce(bootstrap, topic, 6, 5, "c")

        wait_until(lambda: (poll_all([a, c]), expected <= _values(members))[1], 30,
                   what="every record consumed")
        assert log.violations == []
        _commit_all([a, c], end_offsets(bootstrap, topic, 6), bootstrap, group)
        assert [e for m in members for e in m.errors] == []
    finally:
        for m in members:
            m.close()


def test_regex_subscription_picks_up_new_topics(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    prefix, group = unique("rx"), unique("g")
    for name, parts in ((f"{prefix}-a", 2), (f"{prefix}-b", 2), (f"other-{prefix}", 1)):
        create_topic(bootstrap, name, parts)
    log = OwnershipLog()
    # librdkafka subscribes by regex when a name starts with '^'; with the consumer protocol
    # the broker resolves it (RE2, full match).
    pattern = f"^{prefix}-.*"
    a = CpMember(bootstrap, group, "a", log).subscribe([pattern])
    b = CpMember(bootstrap, group, "b", log).subscribe([pattern])
    try:
        settle([a, b], tps_of(f"{prefix}-a", 2) | tps_of(f"{prefix}-b", 2), counts=[2, 2])
        create_topic(bootstrap, f"{prefix}-c", 2)
        every = tps_of(f"{prefix}-a", 2) | tps_of(f"{prefix}-b", 2) | tps_of(f"{prefix}-c", 2)
        settle([a, b], every, counts=[3, 3], timeout=45)
        expected = produce(bootstrap, f"{prefix}-c", 2, 4)
        wait_until(lambda: (poll_all([a, b]), expected <= _values([a, b]))[1], 30,
                   what="the new topic's records consumed")
        assert log.violations == []
    finally:
        a.close()
        b.close()


def test_static_member_returns_to_its_partitions(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("cps"), unique("g")
    create_topic(bootstrap, topic, 4)
    every = tps_of(topic, 4)
    log = OwnershipLog()

    def member(name: str, instance: str) -> CpMember:
        return CpMember(bootstrap, group, name, log,
                        **{"group.instance.id": instance}).subscribe([topic])

    a, b = member("a", "inst-a"), member("b", "inst-b")
    try:
        settle([a, b], every, counts=[2, 2])
        a_parts = a.assignment()
        b_callbacks = log.callbacks("b")
        a.close()  # a static member leaves with epoch -2: its partitions wait for it
        for _ in range(20):
            poll_all([b])
        assert b.assignment() == every - a_parts, "b took a static member's partitions"
        a2 = member("a2", "inst-a")
        settle([a2, b], every, counts=[2, 2])
        assert a2.assignment() == a_parts
        assert log.callbacks("b") == b_callbacks, "b saw a rebalance"
        assert log.violations == []
        a2.close()
    finally:
        a.close()
        b.close()


def test_added_partitions_are_assigned(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("cpp"), unique("g")
    create_topic(bootstrap, topic, 2)
    log = OwnershipLog()
    a = CpMember(bootstrap, group, "a", log).subscribe([topic])
    b = CpMember(bootstrap, group, "b", log).subscribe([topic])
    try:
        settle([a, b], tps_of(topic, 2), counts=[1, 1])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(15)
        settle([a, b], tps_of(topic, 6), counts=[3, 3], timeout=45)
        expected = produce(bootstrap, topic, 6, 3)
        wait_until(lambda: (poll_all([a, b]), expected <= _values([a, b]))[1], 30,
                   what="records of every partition consumed")
        _commit_all([a, b], end_offsets(bootstrap, topic, 6), bootstrap, group)
        assert log.violations == []
    finally:
        a.close()
        b.close()


def test_admin_sees_the_group_type_and_epochs(cp_broker: BrokerProcess) -> None:
    bootstrap = cp_broker.bootstrap
    topic, group = unique("cpd"), unique("g")
    classic_group = unique("classic")
    create_topic(bootstrap, topic, 3)
    a = CpMember(bootstrap, group, "a").subscribe([topic])
    try:
        settle([a], tps_of(topic, 3))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert d.type == ConsumerGroupType.CONSUMER
        assert d.state.name == "STABLE"
        (m,) = d.members
        assert m.client_id == "a"
        held = {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        target = {(tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions}
        assert held == target == tps_of(topic, 3)

        # ListGroups v5: the type of each group, and the types filter.
        old = Member(bootstrap, classic_group, "old").subscribe([topic])
        try:
            wait_until(lambda: (old.poll(), bool(old.consumer.memberid()))[1], 30,
                       what="a classic member to join")
            listed = admin.list_consumer_groups().result(15).valid
            types = {g.group_id: g.type for g in listed}
            assert types[group] == ConsumerGroupType.CONSUMER
            assert types[classic_group] == ConsumerGroupType.CLASSIC
            only = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(15)
            ids = {g.group_id for g in only.valid}
            assert group in ids and classic_group not in ids
            # A classic group is still described (DescribeGroups after GROUP_ID_NOT_FOUND).
            dc = admin.describe_consumer_groups([classic_group])[classic_group].result(15)
            assert dc.type == ConsumerGroupType.CLASSIC
        finally:
            old.close()
    finally:
        a.close()


def test_stale_member_epoch_commit_is_refused(cp_broker: BrokerProcess) -> None:
    """OffsetCommit v9 with a member epoch other than the member's: STALE_MEMBER_EPOCH."""
    from kio.schema.offset_commit.v9.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.schema.types import GroupId, TopicName
    from kio.static.primitive import i32, i64

    from tests.wire import WireClient

    bootstrap = cp_broker.bootstrap
    topic, group = unique("cpe"), unique("g")
    create_topic(bootstrap, topic, 1)
    a = CpMember(bootstrap, group, "a").subscribe([topic])
    try:
        settle([a], tps_of(topic, 1))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        (m,) = admin.describe_consumer_groups([group])[group].result(15).members
        epoch = _member_epoch(bootstrap, group, m.member_id)

        def commit(member_epoch: int) -> int:
            c = WireClient(bootstrap)
            try:
                resp = c.call(8, 9, OffsetCommitRequest(
                    group_id=GroupId(group), generation_id_or_member_epoch=i32(member_epoch),
                    member_id=m.member_id, group_instance_id=None, topics=(
                        OffsetCommitRequestTopic(name=TopicName(topic), partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=i32(0), committed_offset=i64(0),
                                committed_leader_epoch=i32(-1), committed_metadata=""),)),)))
                return int(resp.topics[0].partitions[0].error_code)
            finally:
                c.close()

        assert commit(epoch + 1) == 113  # STALE_MEMBER_EPOCH
        assert commit(epoch) == 0
        assert committed(bootstrap, group, [(topic, 0)]) == {(topic, 0): 0}
    finally:
        a.close()


def _member_epoch(bootstrap: str, group: str, member_id: str) -> int:
    """The member's epoch, from a raw ConsumerGroupDescribe."""
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
    from kio.schema.types import GroupId

    from tests.wire import WireClient

    c = WireClient(bootstrap)
    try:
        resp = c.call(69, 0, ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group),), include_authorized_operations=False))
        (g,) = resp.groups
        assert int(g.error_code) == 0
        return next(int(m.member_epoch) for m in g.members if m.member_id == member_id)
    finally:
        c.close()


def test_consumer_protocol_off_is_not_advertised(tmp_path: Path) -> None:
    """Without ``consumer`` in group.coordinator.rebalance.protocols, ApiVersions hides
    ConsumerGroupHeartbeat and ConsumerGroupDescribe and group.version is not finalized
    (level 0, left out as Kafka leaves out a level-0 feature; still supported 0-1), and
    librdkafka gets no assignment."""
    from kio.schema.api_versions.v4.request import ApiVersionsRequest

    from tests.wire import WireClient

    proc = BrokerProcess(tmp_path / "data", {
        **BROKER_CONFIG, "group.coordinator.rebalance.protocols": "classic"}).start()
    try:
        c = WireClient(proc.bootstrap)
        try:
            resp = c.call(18, 4, ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1"))
        finally:
            c.close()
        keys = {int(k.api_key) for k in resp.api_keys}
        assert 68 not in keys and 69 not in keys and 11 in keys
        # group.version is not finalized; share.version and transaction.version do not
        # depend on the consumer protocol
        assert {f.name for f in resp.finalized_features} == {"share.version",
                                                              "transaction.version"}
        assert resp.finalized_features_epoch >= 0
        assert {(f.name, f.min_version, f.max_version) for f in resp.supported_features} >= {
            ("group.version", 0, 1)}
        topic = unique("off")
        create_topic(proc.bootstrap, topic, 1)
        m = CpMember(proc.bootstrap, unique("g"), "m").subscribe([topic])
        try:
            for _ in range(40):
                m.poll(0.05)
            assert m.assignment() == set()
        finally:
            m.close()
    finally:
        assert proc.stop() == 0


def test_group_session_timeout_override_applies(cp_broker: BrokerProcess) -> None:
    """A group's ``consumer.session.timeout.ms`` (IncrementalAlterConfigs on the GROUP
    resource) replaces the broker's 4 s for its members: a member SIGKILLed before one of a
    group without the override is still in its group when the other has been evicted."""
    from samsa.client import Admin

    bootstrap = cp_broker.bootstrap
    topic, long_group, plain_group = unique("cpo"), unique("g-long"), unique("g-plain")
    create_topic(bootstrap, topic, 2)
    with Admin(bootstrap) as samsa_admin:
        samsa_admin.alter_configs("group", long_group,
                                  set={"consumer.session.timeout.ms": "60000"})
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def members(group: str) -> int:
        return len(admin.describe_consumer_groups([group])[group].result(15).members)

    for group in (long_group, plain_group):  # one after the other: long_group's dies first
        doomed = ProcessMember(bootstrap, group, topic)
        try:
            wait_until(lambda: bool(doomed.holds()), 30,  # noqa: B023
                       what="the member process to get partitions")
        finally:
            doomed.kill()
    wait_until(lambda: members(plain_group) == 0, 30,
               what="the member of the group without the override evicted")
    assert members(long_group) == 1
