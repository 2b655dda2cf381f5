"""Protocol-level edge cases of the group coordinator with a raw client (kio requests)."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v0.request import JoinGroupRequest as JoinV0
from kio.schema.join_group.v0.request import JoinGroupRequestProtocol as ProtoV0
from kio.schema.join_group.v9.request import JoinGroupRequest as JoinV9
from kio.schema.join_group.v9.request import JoinGroupRequestProtocol as ProtoV9
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from samsa.protocol.codec import decode_response, encode_request
from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import create_topic, unique
from tests.wire import WireClient

pytestmark = pytest.mark.conformance

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, FIND = 11, 14, 12, 13, 8, 9, 10
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # v0: topics ["t"]


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def join9(c: WireClient, group: str, member_id: str = "", session: int = 6000,
          protocols: tuple[str, ...] = ("range",), protocol_type: str = "consumer",
          instance: str | None = None) -> Any:
    return c.call(JOIN, 9, JoinV9(
        group_id=GroupId(group), session_timeout=ms(session), rebalance_timeout=ms(6000),
        member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
        protocols=tuple(ProtoV9(name=p, metadata=SUBSCRIPTION) for p in protocols),
        reason=None))


def join_two_step(c: WireClient, group: str, **kw: Any) -> Any:
    first = join9(c, group, **kw)
    assert first.error_code == ErrorCode.member_id_required
    return join9(c, group, member_id=first.member_id, **kw)


def sync5(c: WireClient, group: str, generation: int, member_id: str,
          assignments: dict[str, bytes], protocol_name: str = "range") -> Any:
    return c.call(SYNC, 5, SyncGroupRequest(
        group_id=GroupId(group), generation_id=i32(generation), member_id=member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name=protocol_name,
        assignments=tuple(SyncGroupRequestAssignment(member_id=m, assignment=a)
                          for m, a in assignments.items())))


def heartbeat(c: WireClient, group: str, generation: int, member_id: str) -> int:
    return int(c.call(HEARTBEAT, 4, HeartbeatRequest(
        group_id=GroupId(group), generation_id=i32(generation), member_id=member_id,
        group_instance_id=None)).error_code)


def commit(c: WireClient, group: str, generation: int, member_id: str, topic: str,
           offset: int) -> int:
    resp = c.call(COMMIT, 8, OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(generation),
        member_id=member_id, group_instance_id=None, topics=(OffsetCommitRequestTopic(
            name=TopicName(topic), partitions=(OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(offset),
                committed_leader_epoch=i32(-1), committed_metadata="raw"),)),)))
    return int(resp.topics[0].partitions[0].error_code)


def fetched(c: WireClient, group: str, topic: str) -> int:
    resp = c.call(FETCH, 8, OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
        group_id=GroupId(group), topics=(OffsetFetchRequestTopics(
            name=TopicName(topic), partition_indexes=(i32(0),)),)),), require_stable=False))
    return int(resp.groups[0].topics[0].partitions[0].committed_offset)


@pytest.fixture
def client(broker: BrokerProcess) -> Any:
    c = WireClient(broker.bootstrap)
    yield c
    c.close()


def test_member_id_required_two_step_join(client: WireClient) -> None:
    group = unique("raw")
    first = join9(client, group)
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id.startswith("wire-test-")  # client id + "-" + uuid
    uuid.UUID(first.member_id.removeprefix("wire-test-"))
    assert first.generation_id == -1

    second = join9(client, group, member_id=first.member_id)
    assert second.error_code == ErrorCode.none
    assert (second.generation_id, second.leader, second.member_id) == (
        1, first.member_id, first.member_id)
    assert second.protocol_name == "range"
    assert [m.member_id for m in second.members] == [first.member_id]
    assert second.members[0].metadata == SUBSCRIPTION

    synced = sync5(client, group, 1, first.member_id, {first.member_id: b"plan"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"plan")
    assert heartbeat(client, group, 1, first.member_id) == ErrorCode.none


def test_static_member_joins_without_member_id_required(client: WireClient) -> None:
    resp = join9(client, unique("raw"), instance="static-1")
    assert resp.error_code == ErrorCode.none
    assert resp.member_id.startswith("static-1-")
    assert resp.generation_id == 1


def test_join_v0_gets_a_member_id_at_once(client: WireClient) -> None:
    group = unique("raw")
    resp = client.call(JOIN, 0, JoinV0(
        group_id=GroupId(group), session_timeout=ms(6000), member_id="",
        protocol_type="consumer", protocols=(ProtoV0(name="range", metadata=SUBSCRIPTION),)))
    assert resp.error_code == ErrorCode.none
    assert resp.member_id and resp.leader == resp.member_id
    assert resp.generation_id == 1
    # CompletingRebalance (no SyncGroup yet): heartbeats are answered NONE, as in Kafka.
    assert heartbeat(client, group, 1, resp.member_id) == ErrorCode.none


def test_invalid_session_timeout(client: WireClient) -> None:
    # The test broker's bounds: group.min.session.timeout.ms=1000, max 1800000 (default).
    for session in (999, 1_800_001):
        resp = join9(client, unique("raw"), session=session)
        assert resp.error_code == ErrorCode.invalid_session_timeout, session


def test_inconsistent_group_protocol(broker: BrokerProcess, client: WireClient) -> None:
    group = unique("raw")
    a = join_two_step(client, group, protocols=("range", "roundrobin"))
    assert a.error_code == ErrorCode.none
    other = WireClient(broker.bootstrap)
    try:
        # No protocol in common with the group's members.
        # (checked before MEMBER_ID_REQUIRED, as in Kafka)
        b = join9(other, group, protocols=("cooperative-sticky",))
        assert b.error_code == ErrorCode.inconsistent_group_protocol
        # Another protocol type.
        c = join9(other, group, protocol_type="connect")
        assert c.error_code == ErrorCode.inconsistent_group_protocol
        # SyncGroup naming a protocol the group did not select.
        s = sync5(client, group, a.generation_id, a.member_id, {}, protocol_name="roundrobin")
        assert s.error_code == ErrorCode.inconsistent_group_protocol
    finally:
        other.close()
    # An empty group accepts any protocol type.
    empty = join_two_step(client, unique("raw"), protocol_type="connect")
    assert empty.error_code == ErrorCode.none


def test_unknown_member_heartbeat_and_leave(client: WireClient) -> None:
    group = unique("raw")
    assert heartbeat(client, group, 1, "nobody") == ErrorCode.unknown_member_id  # no group
    a = join_two_step(client, group)
    assert sync5(client, group, 1, a.member_id, {a.member_id: b""}).error_code == 0
    assert heartbeat(client, group, 1, "nobody") == ErrorCode.unknown_member_id
    assert heartbeat(client, group, 1, a.member_id) == ErrorCode.none
    left = client.call(LEAVE, 5, LeaveGroupRequest(group_id=GroupId(group), members=(
        MemberIdentity(member_id="nobody", group_instance_id=None, reason=None),
        MemberIdentity(member_id=a.member_id, group_instance_id=None, reason="done"))))
    assert left.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in left.members] == [
        ("nobody", ErrorCode.unknown_member_id), (a.member_id, ErrorCode.none)]
    assert heartbeat(client, group, 1, a.member_id) == ErrorCode.unknown_member_id


def test_commit_generation_checks(broker: BrokerProcess, client: WireClient) -> None:
    group, topic = unique("raw"), unique("rawt")
    create_topic(broker.bootstrap, topic, 1)
    a = join_two_step(client, group)
    assert sync5(client, group, 1, a.member_id, {a.member_id: b""}).error_code == 0
    for wrong in (0, 2):
        assert commit(client, group, wrong, a.member_id, topic, 5) \
            == ErrorCode.illegal_generation
    assert commit(client, group, 1, "nobody", topic, 5) == ErrorCode.unknown_member_id
    assert commit(client, group, -1, "", topic, 5) == ErrorCode.unknown_member_id  # not Empty
    assert commit(client, group, 1, a.member_id, topic, 7) == ErrorCode.none
    assert fetched(client, group, topic) == 7
    # A simple consumer (generation -1) commits to a group that has no members.
    simple = unique("simple")
    assert commit(client, simple, -1, "", topic, 3) == ErrorCode.none
    assert fetched(client, simple, topic) == 3


def test_pending_member_holds_the_join_phase(broker: BrokerProcess, client: WireClient) -> None:
    """A member id handed out with MEMBER_ID_REQUIRED is pending: a rebalance waits for it
    (Kafka's hasAllMembersJoined), so the pending member lands in the same generation."""
    group = unique("raw")
    b = join_two_step(client, group)
    assert sync5(client, group, 1, b.member_id, {b.member_id: b""}).error_code == 0
    other = WireClient(broker.bootstrap, timeout=20)
    try:
        pending = join9(other, group)
        assert pending.error_code == ErrorCode.member_id_required
        # The leader rejoins (a rebalance); its answer waits for the pending member.
        client.correlation += 1
        client.send_raw(encode_request(JOIN, 9, client.correlation, "wire-test", JoinV9(
            group_id=GroupId(group), session_timeout=ms(6000), rebalance_timeout=ms(6000),
            member_id=b.member_id, group_instance_id=None, protocol_type="consumer",
            protocols=(ProtoV9(name="range", metadata=SUBSCRIPTION),), reason=None)))
        a = join9(other, group, member_id=pending.member_id)
        _, leader = decode_response(client.read_frame(), JOIN, 9)
        assert (a.error_code, leader.error_code) == (0, 0)
        assert a.generation_id == leader.generation_id == 2
        assert sorted(m.member_id for m in leader.members) == sorted(
            [b.member_id, pending.member_id])
    finally:
        other.close()


def test_find_coordinator_batch_and_transaction_key(client: WireClient) -> None:
    groups = client.call(FIND, 4, FindCoordinatorRequest(
        key_type=i8(0), coordinator_keys=("g-one", "g-two")))
    assert [(c.key, c.error_code, c.node_id) for c in groups.coordinators] == [
        ("g-one", 0, 0), ("g-two", 0, 0)]
    assert all(c.port > 0 and c.host for c in groups.coordinators)

    # transactional ids: COORDINATOR_NOT_AVAILABLE while __transaction_state is created,
    # then this node
    deadline = time.monotonic() + 10
    while True:
        resp = client.call(FIND, 4, FindCoordinatorRequest(
            key_type=i8(1), coordinator_keys=("txn-a", "txn-b")))
        codes = {c.error_code for c in resp.coordinators}
        if codes != {ErrorCode.coordinator_not_available} or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [
        ("txn-a", 0, 0), ("txn-b", 0, 0)]
    assert all(c.port > 0 and c.host for c in resp.coordinators)
