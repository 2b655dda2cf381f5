"""Every version of the group and offset APIs, over TCP with raw requests.

The handlers build their answers typed, as one version (the newest, or the newest of a
shape); the broker converts them to the version asked. Each version must decode and carry
the same facts.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from samsa.broker.handlers import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from tests.wire import WireClient

SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # v0: topics ["t"]
NONE = ErrorCode.none


def versions(module: Any) -> list[int]:
    lo, hi = module.VERSIONS
    return list(range(lo, hi + 1))


def call(c: WireClient, api: ApiKey, version: int, **fields: Any) -> Any:
    return c.call(api, version, build(load_request_schema(api, version), fields))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def join(c: WireClient, group: str, version: int = 9, member_id: str = "") -> Any:
    """A whole join at ``version`` (two steps from v4); returns the JoinGroup answer."""
    fields = dict(group_id=group, session_timeout=6000, rebalance_timeout=6000,
                  member_id=member_id, protocol_type="consumer", group_instance_id=None,
                  protocols=[{"name": "range", "metadata": SUBSCRIPTION}], reason=None)
    resp = call(c, ApiKey.JOIN_GROUP, version, **fields)
    if resp.error_code == ErrorCode.member_id_required:
        fields["member_id"] = resp.member_id
        resp = call(c, ApiKey.JOIN_GROUP, version, **fields)
    return resp


def stable_member(c: WireClient, group: str) -> str:
    """A one-member Stable group; returns the member id (generation 1)."""
    member = join(c, group).member_id
    synced = call(c, ApiKey.SYNC_GROUP, 5, group_id=group, generation_id=1, member_id=member,
                  group_instance_id=None, protocol_type="consumer", protocol_name="range",
                  assignments=[{"member_id": member, "assignment": b"plan"}])
    assert synced.error_code == NONE
    return member


@pytest.fixture(scope="module")
def topic(client: WireClient) -> str:
    name = unique("versions")
    resp = call(client, ApiKey.CREATE_TOPICS, 7, timeout=10000, validate_only=False, topics=[
        {"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
         "configs": []}])
    assert resp.topics[0].error_code == NONE
    return name


def topic_id(c: WireClient, name: str) -> uuid.UUID:
    (t,) = call(c, ApiKey.METADATA, 12, topics=[{"name": name, "topic_id": None}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False).topics
    assert t.error_code == NONE and t.topic_id is not None
    return t.topic_id  # type: ignore[no-any-return]


def by_id(version: int) -> bool:
    """OffsetCommit and OffsetFetch name topics by id from v10 (and by name before)."""
    return version >= 10


@pytest.mark.parametrize("version", versions(join_group))
def test_join_group(client: WireClient, version: int) -> None:
    resp = join(client, unique("join"), version)
    assert resp.error_code == NONE
    assert (resp.generation_id, resp.leader) == (1, resp.member_id)
    assert resp.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in resp.members] == [(resp.member_id, SUBSCRIPTION)]
    if version >= 7:
        assert resp.protocol_type == "consumer"
    if version >= 9:
        assert resp.skip_assignment is False


def test_join_group_error_keeps_the_v0_protocol_name_non_null(client: WireClient) -> None:
    resp = join(client, "", 0)  # an empty group id: INVALID_GROUP_ID, no protocol chosen
    assert resp.error_code == ErrorCode.invalid_group_id
    assert resp.protocol_name == ""


@pytest.mark.parametrize("version", versions(sync_group))
def test_sync_group(client: WireClient, version: int) -> None:
    group = unique("sync")
    member = join(client, group).member_id
    resp = call(client, ApiKey.SYNC_GROUP, version, group_id=group, generation_id=1,
                member_id=member, group_instance_id=None, protocol_type="consumer",
                protocol_name="range", assignments=[{"member_id": member, "assignment": b"p"}])
    assert (resp.error_code, resp.assignment) == (NONE, b"p")
    if version >= 5:
        assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")


@pytest.mark.parametrize("version", versions(heartbeat))
def test_heartbeat(client: WireClient, version: int) -> None:
    group = unique("hb")
    member = stable_member(client, group)
    ask = dict(group_id=group, generation_id=1, group_instance_id=None)
    assert call(client, ApiKey.HEARTBEAT, version, member_id=member, **ask).error_code == NONE
    assert call(client, ApiKey.HEARTBEAT, version, member_id="nobody", **ask).error_code \
        == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", versions(leave_group))
def test_leave_group(client: WireClient, version: int) -> None:
    group = unique("leave")
    member = stable_member(client, group)
    if version < 3:
        assert call(client, ApiKey.LEAVE_GROUP, version, group_id=group,
                    member_id="nobody").error_code == ErrorCode.unknown_member_id
        resp = call(client, ApiKey.LEAVE_GROUP, version, group_id=group, member_id=member)
        assert resp.error_code == NONE
    else:
        resp = call(client, ApiKey.LEAVE_GROUP, version, group_id=group, members=[
            {"member_id": "nobody", "group_instance_id": None, "reason": None},
            {"member_id": member, "group_instance_id": None, "reason": "done"}])
        assert resp.error_code == NONE
        assert [(m.member_id, m.error_code) for m in resp.members] == [
            ("nobody", ErrorCode.unknown_member_id), (member, NONE)]
    left = call(client, ApiKey.HEARTBEAT, 4, group_id=group, generation_id=1, member_id=member,
                group_instance_id=None)
    assert left.error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", versions(offset_commit))
def test_offset_commit_then_fetch(client: WireClient, topic: str, version: int) -> None:
    group, unknown = unique("commit"), uuid.uuid4()
    mine = {"name": topic, "topic_id": topic_id(client, topic)}
    missing = {"name": "no-such-topic", "topic_id": unknown}
    resp = call(client, ApiKey.OFFSET_COMMIT, version, group_id=group,
                generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                retention_time=-1, topics=[
                    {**mine, "partitions": [
                        {"partition_index": i, "committed_offset": 10 + version + i,
                         "committed_leader_epoch": -1, "committed_metadata": f"m{i}"}
                        for i in (0, 1, 7)]},
                    {**missing, "partitions": [
                        {"partition_index": 0, "committed_offset": 1,
                         "committed_leader_epoch": -1, "committed_metadata": None}]}])
    key = "topic_id" if by_id(version) else "name"
    unknown_topic = ErrorCode.unknown_topic_id if by_id(version) else \
        ErrorCode.unknown_topic_or_partition
    assert [(getattr(t, key), [(p.partition_index, p.error_code) for p in t.partitions])
            for t in resp.topics] == [
        (mine[key], [(0, NONE), (1, NONE), (7, ErrorCode.unknown_topic_or_partition)]),
        (missing[key], [(0, unknown_topic)])]
    assert fetch_offsets(client, 8, group, topic) == {0: (10 + version, "m0"),
                                                      1: (11 + version, "m1")}


def fetch_offsets(c: WireClient, version: int, group: str, topic: str,
                  partitions: tuple[int, ...] | None = (0, 1)
                  ) -> dict[int, tuple[int, str | None]]:
    """``topic``'s committed offsets (``partitions`` None: a null topic list, all the group
    has, which must be ``topic``'s), by name or (v10) by id."""
    named = {"topic_id": topic_id(c, topic)} if by_id(version) else {"name": topic}
    topics = None if partitions is None else [{**named, "partition_indexes": list(partitions)}]
    if version >= 8:
        resp = call(c, ApiKey.OFFSET_FETCH, version, require_stable=False,
                    groups=[{"group_id": group, "topics": topics}])
        (answer,) = resp.groups
    else:
        answer = resp = call(c, ApiKey.OFFSET_FETCH, version, group_id=group, topics=topics,
                             require_stable=False)
    if version >= 2:
        assert answer.error_code == NONE
    (t,) = answer.topics
    key = "topic_id" if by_id(version) else "name"
    assert getattr(t, key) == named[key]
    assert all(p.error_code == NONE for p in t.partitions)
    return {p.partition_index: (p.committed_offset, p.metadata) for p in t.partitions}


@pytest.mark.parametrize("version", versions(offset_fetch))
def test_offset_fetch(client: WireClient, topic: str, version: int) -> None:
    group = unique("fetch")
    call(client, ApiKey.OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1,
         member_id="", group_instance_id=None, topics=[{"name": topic, "partitions": [
             {"partition_index": 1, "committed_offset": 42, "committed_leader_epoch": -1,
              "committed_metadata": "meta"}]}])
    assert fetch_offsets(client, version, group, topic) == {0: (-1, ""), 1: (42, "meta")}
    if version >= 2:  # null topics: all of the group's offsets
        assert fetch_offsets(client, version, group, topic, None) == {1: (42, "meta")}


def test_offset_fetch_v10_unknown_and_deleted_topic_ids(client: WireClient, topic: str) -> None:
    """By id, an unknown id is an error on each of its partitions (by name it is only "no
    offset"), and a null topic list leaves out committed topics that no longer exist."""
    group, gone = unique("fetch10"), unique("gone")
    assert call(client, ApiKey.CREATE_TOPICS, 7, timeout=10000, validate_only=False, topics=[
        {"name": gone, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}]).topics[0].error_code == NONE
    gone_id = topic_id(client, gone)
    commit = [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                          "committed_leader_epoch": -1,
                                          "committed_metadata": ""}]} for t in (topic, gone)]
    assert call(client, ApiKey.OFFSET_COMMIT, 9, group_id=group,
                generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=commit).topics[1].partitions[0].error_code == NONE
    assert call(client, ApiKey.DELETE_TOPICS, 6, timeout=10000,
                topics=[{"name": gone, "topic_id": None}]).responses[0].error_code == NONE
    unknown = uuid.uuid4()

    def fetch(version: int, topics: list[dict[str, Any]] | None) -> Any:
        (g,) = call(client, ApiKey.OFFSET_FETCH, version, require_stable=False,
                    groups=[{"group_id": group, "topics": topics}]).groups
        assert g.error_code == NONE
        return [(t.topic_id if version >= 10 else t.name,
                 [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                for t in g.topics]

    mine = topic_id(client, topic)
    assert fetch(10, [{"topic_id": unknown, "partition_indexes": [0, 1]},
                      {"topic_id": mine, "partition_indexes": [0, 1]},
                      {"topic_id": gone_id, "partition_indexes": [0]}]) == [
        (unknown, [(0, -1, ErrorCode.unknown_topic_id), (1, -1, ErrorCode.unknown_topic_id)]),
        (mine, [(0, 5, NONE), (1, -1, NONE)]),
        (gone_id, [(0, -1, ErrorCode.unknown_topic_id)])]
    assert fetch(10, None) == [(mine, [(0, 5, NONE)])]


def test_offset_fetch_v8_several_groups(client: WireClient, topic: str) -> None:
    groups = [unique("fetch8"), "", unique("fetch8")]
    resp = call(client, ApiKey.OFFSET_FETCH, 8, require_stable=False, groups=[
        {"group_id": g, "topics": [{"name": topic, "partition_indexes": [0]}]} for g in groups])
    assert [(g.group_id, g.error_code, g.topics[0].partitions[0].committed_offset)
            for g in resp.groups] == [(g, NONE, -1) for g in groups]


@pytest.mark.parametrize("version", versions(offset_delete))
def test_offset_delete(client: WireClient, topic: str, version: int) -> None:
    group = unique("odel")
    call(client, ApiKey.OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1,
         member_id="", group_instance_id=None, topics=[{"name": topic, "partitions": [
             {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
              "committed_metadata": None}]}])
    resp = call(client, ApiKey.OFFSET_DELETE, version, group_id=group, topics=[
        {"name": topic, "partitions": [{"partition_index": 0}, {"partition_index": 9}]}])
    assert resp.error_code == NONE
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [
        (0, NONE), (9, ErrorCode.unknown_topic_or_partition)]
    missing = call(client, ApiKey.OFFSET_DELETE, version, group_id=unique("none"), topics=[])
    assert (missing.error_code, missing.topics) == (ErrorCode.group_id_not_found, ())


@pytest.mark.parametrize("version", versions(delete_groups))
def test_delete_groups(client: WireClient, topic: str, version: int) -> None:
    empty, busy, missing = unique("del"), unique("del"), unique("del")
    call(client, ApiKey.OFFSET_COMMIT, 8, group_id=empty, generation_id_or_member_epoch=-1,
         member_id="", group_instance_id=None, topics=[{"name": topic, "partitions": [
             {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
              "committed_metadata": None}]}])
    stable_member(client, busy)
    resp = call(client, ApiKey.DELETE_GROUPS, version, groups_names=[empty, busy, missing])
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        (empty, NONE), (busy, ErrorCode.non_empty_group),
        (missing, ErrorCode.group_id_not_found)]
    assert fetch_offsets(client, 8, empty, topic, (0,)) == {0: (-1, "")}


@pytest.mark.parametrize("version", versions(find_coordinator))
def test_find_coordinator(client: WireClient, version: int) -> None:
    if version >= 4:
        resp = call(client, ApiKey.FIND_COORDINATOR, version, key_type=0,
                    coordinator_keys=["a", "b"])
        assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [
            ("a", NONE, 0), ("b", NONE, 0)]
        assert all(c.port > 0 and c.host for c in resp.coordinators)
        return
    resp = call(client, ApiKey.FIND_COORDINATOR, version, key="g", key_type=0)
    assert (resp.error_code, resp.node_id) == (NONE, 0)
    assert resp.port > 0 and resp.host
    if version >= 1:  # a transactional id: once __transaction_state exists, this node
        deadline = time.monotonic() + 10
        while True:
            txn = call(client, ApiKey.FIND_COORDINATOR, version, key="t", key_type=1)
            if txn.error_code != ErrorCode.coordinator_not_available \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (txn.error_code, txn.node_id) == (NONE, 0) and txn.port > 0
        unknown = call(client, ApiKey.FIND_COORDINATOR, version, key="t", key_type=2)
        assert (unknown.error_code, unknown.node_id) == (ErrorCode.invalid_request, -1)


@pytest.mark.parametrize("version", versions(describe_groups))
def test_describe_groups(client: WireClient, version: int) -> None:
    group = unique("desc")
    member = stable_member(client, group)
    resp = call(client, ApiKey.DESCRIBE_GROUPS, version, groups=[group, unique("none")],
                include_authorized_operations=True)
    found, missing = resp.groups
    assert (found.error_code, found.group_id, found.group_state, found.protocol_type,
            found.protocol_data) == (NONE, group, "Stable", "consumer", "range")
    (m,) = found.members
    assert (m.member_id, m.client_id, m.member_metadata, m.member_assignment) == (
        member, "wire-test", SUBSCRIPTION, b"plan")
    assert m.client_host.startswith("/127.0.0.1")
    if version >= 6:  # KIP-1043: an absent group is an error with Kafka's message
        assert (missing.error_code, missing.error_message, missing.group_state) == (
            ErrorCode.group_id_not_found, f"Group {missing.group_id} not found.", "Dead")
        assert found.error_message is None
    else:
        assert (missing.error_code, missing.group_state, missing.members) == (NONE, "Dead", ())
    if version >= 3:  # no authorizer: every group operation, as Kafka answers
        read, delete, describe, describe_configs, alter_configs = 3, 6, 8, 10, 11
        assert found.authorized_operations == sum(
            1 << op for op in (read, delete, describe, describe_configs, alter_configs))
    if version >= 4:
        assert m.group_instance_id is None


@pytest.mark.parametrize("version", versions(describe_groups))
def test_describe_groups_on_a_consumer_group(client: WireClient, version: int) -> None:
    """A KIP-848 group is not classic: Dead without an error before v6, from v6
    GROUP_ID_NOT_FOUND and "Group g is not a classic group." (Kafka 4.x)."""
    group = unique("cgdesc")
    joined = call(client, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id=group, member_id="",
                  member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout=30000,
                  subscribed_topic_names=["t"], server_assignor=None, topic_partitions=[])
    assert joined.error_code == NONE and joined.member_epoch >= 1
    (described,) = call(client, ApiKey.DESCRIBE_GROUPS, version, groups=[group],
                        include_authorized_operations=False).groups
    assert (described.group_id, described.group_state, described.members) == (group, "Dead", ())
    if version >= 6:
        assert (described.error_code, described.error_message) == (
            ErrorCode.group_id_not_found, f"Group {group} is not a classic group.")
    else:
        assert described.error_code == NONE


@pytest.mark.parametrize("version", versions(list_groups))
def test_list_groups(client: WireClient, version: int) -> None:
    group = unique("list")
    stable_member(client, group)
    resp = call(client, ApiKey.LIST_GROUPS, version, states_filter=[], types_filter=[])
    assert resp.error_code == NONE
    (listed,) = [g for g in resp.groups if g.group_id == group]
    assert listed.protocol_type == "consumer"
    if version >= 4:
        assert listed.group_state == "Stable"
        empty = call(client, ApiKey.LIST_GROUPS, version, states_filter=["Empty"],
                     types_filter=[])
        assert group not in {g.group_id for g in empty.groups}
    if version >= 5:
        assert listed.group_type == "classic"
