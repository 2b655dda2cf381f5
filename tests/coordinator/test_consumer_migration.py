"""Online migration between classic and consumer groups (KIP-848), on the fake clock.

A live classic group gains a consumer-protocol member (upgrade); its classic members keep
working through JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit; the group becomes
classic again when its last consumer-protocol member leaves (downgrade). Each step checks
that replaying the records rebuilds the live state (and conftest checks it at the end).
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode as E

from samsa import TopicPartition
from samsa.assignors.codec import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from samsa.assignors.interface import Assignment, Subscription
from samsa.coordinator import (
    CoordinatorConfig,
    CoordinatorShard,
    GroupState,
    JoinGroup,
    SyncGroup,
)
from samsa.coordinator.consumer.group import MemberState
from samsa.coordinator.consumer.records import (
    ClassicMemberMetadata,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    deserialize,
    serialize,
)
from samsa.coordinator.records import GroupMetadataKey, GroupMetadataValue
from samsa.coordinator.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
)
from samsa.coordinator.timers import TimerKind

from .consumer_ctx import T1, T2, CCtx, as_dict

Owned = dict[str, set[int]]


def sub(topics: tuple[str, ...] = ("t1",), owned: Owned | None = None, version: int = 3) -> bytes:
    parts = tuple(TopicPartition(t, p) for t, ps in sorted((owned or {}).items())
                  for p in sorted(ps))
    return encode_subscription(Subscription(topics, owned_partitions=parts), version)


def asg(owned: Owned) -> bytes:
    return encode_assignment(Assignment(tuple(
        TopicPartition(t, p) for t, ps in sorted(owned.items()) for p in sorted(ps))))


def parts(data: bytes) -> Owned:
    out: Owned = {}
    for tp in decode_assignment(data).partitions:
        out.setdefault(tp.topic, set()).add(tp.partition)
    return out


class MCtx(CCtx):
    """CCtx plus classic members speaking the real consumer protocol."""

    def classic_group(self, owned: dict[str, Owned]) -> dict[str, str]:
        """A Stable classic group: one member per key of ``owned`` (name -> member id)."""
        names = list(owned)
        ids, tokens = {}, {}
        for name in names:
            mid, tok = self.join_new(protocols=(("range", sub()),), client_id=name)
            ids[name], tokens[name] = mid, tok
        self.sleep_until(lambda: all(self.reply(t) is not None for t in tokens.values()))
        first = self.join_reply(tokens[names[0]])
        gen, leader = first.generation_id, first.leader
        by_id = {ids[n]: asg(owned[n]) for n in names}
        for name in names:
            if ids[name] != leader:
                self.sync(ids[name], gen)
        self.sync(leader, gen, tuple(by_id.items()))
        assert self.state() is GroupState.STABLE
        return ids

    def cjoin(self, member_id: str, owned: Owned | None = None, topics: tuple[str, ...] = ("t1",),
              session_ms: int = 10_000, instance_id: str | None = None,
              version: int = 3) -> JoinGroupResponse:
        return self.join_reply(self.join(member_id, protocols=(("range", sub(topics, owned,
                                                                             version)),),
                                         session_ms=session_ms, instance_id=instance_id))

    def csync(self, member_id: str, generation: int) -> tuple[int, Owned]:
        r = self.sync_reply(self.sync(member_id, generation))
        return r.error_code, parts(r.assignment) if r.error_code == 0 else {}

    def chb(self, member_id: str, generation: int) -> int:
        r = self.reply(self.heartbeat(member_id, generation))
        assert isinstance(r, HeartbeatResponse)
        return r.error_code

    def step_check(self) -> None:
        self.check_replay()
        if "g" in self.shard().hard.consumer.groups:
            self.owners()  # single holder per partition


def _upgraded(ctx: MCtx) -> dict[str, str]:
    ids = ctx.classic_group({"a": {"t1": {0, 1}}, "b": {"t1": {2}}})
    r = ctx.hb("c", 0)
    assert r.error_code == E.none
    ctx.step_check()
    return ids


def test_a_consumer_member_upgrades_a_live_classic_group() -> None:
    ctx = MCtx()
    ids = ctx.classic_group({"a": {"t1": {0, 1}}, "b": {"t1": {2}}})
    generation = ctx.describe().summary.generation
    r = ctx.hb("c", 0)
    assert r.error_code == E.none and r.assignment == ()  # every partition is still held
    assert "g" not in ctx.shard().groups and "g" not in ctx.shard().hard.groups
    assert (GroupMetadataKey("g"), None) in [(x.key, x.value) for x in ctx.records]
    g = ctx.cgroup()
    a, b = g.members[ids["a"]], g.members[ids["b"]]
    assert a.classic is not None and a.classic.session_timeout_ms == 10_000
    assert a.classic.supported_protocols == (("range", sub()),)
    assert (a.member_epoch, a.state, a.assigned) == (generation, MemberState.STABLE,
                                                      {T1: frozenset({0, 1})})
    assert b.assigned == {T1: frozenset({2})} and g.members["c"].classic is None
    assert g.epoch == generation + 1  # the consumer member's join
    ctx.step_check()
    # the classic session timers now run in the consumer group
    assert ctx.timer.deadlines[ctx.shard().key(TimerKind.CONSUMER_SESSION, "g", ids["a"])] \
        == ctx.now + 10_000


@pytest.mark.parametrize("cooperative", [False, True])
def test_classic_members_reconcile_through_join_sync_heartbeat(cooperative: bool) -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    a, b = ids["a"], ids["b"]
    gen = ctx.cgroup().members[a].member_epoch
    owned = {a: {"t1": {0, 1}}, b: {"t1": {2}}}
    c_owned: dict[uuid.UUID, set[int]] = {}
    assert ctx.chb(a, gen) == E.rebalance_in_progress  # epoch behind the group's
    assert ctx.shard().is_scheduled(TimerKind.CONSUMER_JOIN, "g", a)
    generation = {a: gen, b: gen}
    rejoins = 0
    for _ in range(6):
        for mid in (a, b):
            if ctx.chb(mid, generation[mid]) == E.none:
                continue
            # eager members give everything up before rejoining; cooperative ones report it
            rejoins += 1
            report = owned[mid] if cooperative else {}
            if not cooperative:
                owned[mid] = {}
            j = ctx.cjoin(mid, report)
            generation[mid] = j.generation_id
            assert j.error_code == E.none and j.leader == "" and j.protocol_name == "range"
            assert not ctx.shard().is_scheduled(TimerKind.CONSUMER_JOIN, "g", mid)
            code, got = ctx.csync(mid, j.generation_id)
            assert code == E.none
            owned[mid] = got
            ctx.step_check()
        r = ctx.hb("c", ctx.member("c").member_epoch, owned=c_owned)
        if r.assignment is not None:
            c_owned = as_dict(r.assignment)
        ctx.step_check()
        held = [p for o in owned.values() for p in o.get("t1", set())] + list(c_owned.get(T1, ()))
        assert len(held) == len(set(held))  # never two owners
    g = ctx.cgroup()
    assert g.state.value == "Stable"
    assert sorted(held) == [0, 1, 2] and c_owned  # c got its share
    assert rejoins >= (3 if cooperative else 2)  # a cooperative member rejoins to revoke
    for mid in (a, b):
        m = g.members[mid]
        assert ctx.chb(mid, m.member_epoch) == E.none
    assert ctx.chb(a, 1) == E.illegal_generation


def test_classic_sync_and_heartbeat_errors_in_a_consumer_group() -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    a = ids["a"]
    gen = ctx.cgroup().members[a].member_epoch
    assert ctx.csync(a, gen)[0] == E.rebalance_in_progress  # must rejoin first
    assert ctx.csync(a, gen + 5)[0] == E.illegal_generation
    assert ctx.csync("nope", gen)[0] == E.unknown_member_id
    assert ctx.csync("c", 1)[0] == E.unknown_member_id  # a consumer-protocol member
    assert ctx.chb("c", 1) == E.unknown_member_id
    j = ctx.cjoin(a, {})
    r = ctx.sync_reply(ctx.call(SyncGroup("g", j.generation_id, a, (), protocol_type="consumer",
                                          protocol_name="roundrobin")))
    assert r.error_code == E.inconsistent_group_protocol
    bad = ctx.join_reply(ctx.join(a, protocols=(("roundrobin", sub()),)))
    assert bad.error_code == E.inconsistent_group_protocol  # a protocol 'b' does not support
    assert ctx.cjoin(a, {}, session_ms=1).error_code == E.invalid_session_timeout
    new = ctx.join_reply(ctx.join("", protocols=(("range", sub()),)))
    assert new.error_code == E.member_id_required
    ctx.step_check()


def test_a_new_classic_member_joins_a_consumer_group() -> None:
    ctx = MCtx()
    ctx.hb("c", 0)
    r = ctx.join_reply(ctx.join("", protocols=(("range", sub()),)))
    assert r.error_code == E.member_id_required
    j = ctx.cjoin(r.member_id, {})
    assert j.error_code == E.none
    m = ctx.member(r.member_id)
    assert m.classic is not None and m.subscribed_topic_names == ("t1",)
    assert ctx.cgroup().epoch == 3
    ctx.step_check()


def test_offset_commit_of_a_classic_member_uses_its_generation() -> None:
    from samsa.coordinator import OffsetCommit
    from samsa.coordinator.events import CommitPartition, CommitTopic

    ctx = MCtx()
    ids = _upgraded(ctx)
    a = ids["a"]
    gen = ctx.cgroup().members[a].member_epoch

    def commit(member: str, generation: int, version: int | None, partition: int = 0) -> int:
        ev = OffsetCommit("g", (CommitTopic("t1", (CommitPartition(partition, 7),)),),
                          generation, member, api_version=version)
        r = ctx.reply(ctx.call(ev))
        assert isinstance(r, OffsetCommitResponse)
        return r.topics[0].partitions[0].error_code

    assert commit(a, gen, 8) == E.none  # classic members commit with any version
    assert commit(a, gen + 1, 8) == E.illegal_generation
    # an older generation than when it got t1-0 (its generation at the upgrade, KIP-1251)
    assert ctx.member(a).assignment_epochs[(T1, 0)] == gen
    assert commit(a, gen - 1, 8) == E.illegal_generation
    assert commit("c", ctx.member("c").member_epoch, 8) == E.unsupported_version
    assert ctx.committed() == {("t1", 0): 7}
    # a revokes what c gets and rejoins at the group's epoch: the generation it had still
    # commits the partition it kept, and not the one it gave up
    assert ctx.chb(a, gen) == E.rebalance_in_progress
    j = ctx.cjoin(a, {"t1": {0, 1}})
    code, kept = ctx.csync(a, j.generation_id)
    assert code == E.none and len(kept["t1"]) == 1
    j = ctx.cjoin(a, kept)
    assert j.generation_id == gen + 1
    (given_up,) = {0, 1} - kept["t1"]
    assert commit(a, gen, 9, min(kept["t1"])) == E.none
    assert commit(a, gen, 9, given_up) == E.illegal_generation


def test_leave_group_of_a_classic_member_fences_it() -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    epoch = ctx.cgroup().epoch
    r = ctx.reply(ctx.leave(ids["a"], "c"))
    assert isinstance(r, LeaveGroupResponse)
    assert [m.error_code for m in r.members] == [E.none, E.unknown_member_id]
    assert ids["a"] not in ctx.cgroup().members and ctx.cgroup().epoch == epoch + 1
    assert not ctx.shard().is_scheduled(TimerKind.CONSUMER_SESSION, "g", ids["a"])
    ctx.step_check()


def test_the_group_downgrades_when_its_last_consumer_member_leaves() -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    a, b = ids["a"], ids["b"]
    for mid in (a, b):  # everyone reconciles first (eager)
        j = ctx.cjoin(mid, {})
        ctx.csync(mid, j.generation_id)
    ctx.hb("c", ctx.member("c").member_epoch, owned={})
    targets = {mid: dict(ctx.cgroup().target.get(mid, {})) for mid in (a, b)}
    epoch = ctx.cgroup().epoch
    r = ctx.hb("c", -1)
    assert r.error_code == E.none
    assert "g" not in ctx.shard().hard.consumer.groups
    value = ctx.shard().hard.groups["g"]
    assert isinstance(value, GroupMetadataValue)
    assert (value.generation, value.protocol_type, value.protocol) == (epoch, "consumer", "range")
    written = {mv.member_id: parts(mv.assignment) for mv in value.members}
    assert written == {mid: {"t1": set(targets[mid].get(T1, ()))} if targets[mid] else {}
                       for mid in (a, b)}
    assert ctx.state() is GroupState.PREPARING_REBALANCE
    keys = [type(x.key).__name__ for x in ctx.records[-12:]]
    assert keys[-1] == "GroupMetadataKey" and "ConsumerGroupMetadataKey" in keys
    ctx.step_check()
    # the classic members rejoin the classic group and it completes a generation
    ja, jb = ctx.join(a, protocols=(("range", sub()),)), ctx.join(b, protocols=(("range", sub()),))
    ctx.sleep_until(lambda: ctx.reply(ja) is not None and ctx.reply(jb) is not None)
    ra, rb_ = ctx.join_reply(ja), ctx.join_reply(jb)
    assert ra.generation_id == epoch + 1
    leader = ra.leader
    other = b if leader == a else a
    ctx.sync(other, ra.generation_id)
    ctx.sync(leader, ra.generation_id, ((a, asg({"t1": {0, 1}})), (b, asg({"t1": {2}}))))
    assert ctx.state() is GroupState.STABLE and rb_.error_code == E.none
    ctx.step_check()


def test_session_expiry_of_a_classic_member_fences_it_and_downgrades() -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    a, b = ids["a"], ids["b"]
    ctx.sleep(9_000)
    ctx.hb("c", ctx.member("c").member_epoch)
    assert ctx.chb(b, ctx.member(b).member_epoch) == E.rebalance_in_progress  # b renews
    ctx.sleep(2_000)  # a's 10 s session (not the consumer group's 45 s) ran out
    assert a not in ctx.cgroup().members and b in ctx.cgroup().members
    ctx.step_check()
    # b never rejoins: its join timeout (its rebalance timeout, 30 s) fences it
    for _ in range(7):
        ctx.sleep(5_000)
        ctx.hb("c", ctx.member("c").member_epoch)
    assert b not in ctx.cgroup().members
    # and when the consumer member's session runs out, nobody classic is left: no downgrade
    ctx.sleep(50_000)
    assert "g" not in ctx.shard().groups
    ctx.step_check()


def test_expiry_of_the_last_consumer_member_downgrades() -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    for mid in ids.values():  # the classic members catch up, then only heartbeat
        ctx.csync(mid, ctx.cjoin(mid, {}).generation_id)
    for _ in range(10):
        ctx.sleep(5_000)
        for mid in ids.values():
            if "g" in ctx.shard().hard.consumer.groups:
                assert ctx.chb(mid, ctx.member(mid).member_epoch) == E.none
    assert ctx.state() is GroupState.PREPARING_REBALANCE  # c's session expired
    assert set(ctx.describe().member_ids) == set(ids.values())
    ctx.step_check()


@pytest.mark.parametrize("policy,upgrades,downgrades", [
    ("bidirectional", True, True),
    ("upgrade", True, False),
    ("downgrade", False, True),
    ("disabled", False, False),
])
def test_migration_policy(policy: str, upgrades: bool, downgrades: bool) -> None:
    ctx = MCtx(CoordinatorConfig(offsets_topic_num_partitions=1,
                                 consumer_migration_policy=policy))
    ctx.classic_group({"a": {"t1": {0, 1, 2}}})
    r = ctx.hb("c", 0)
    if not upgrades:
        assert r.error_code == E.group_id_not_found
        assert r.error_message is not None and "online upgrade is disabled" in r.error_message
        assert ctx.state() is GroupState.STABLE
        return
    assert r.error_code == E.none
    ctx.hb("c", -1)
    in_consumer = "g" in ctx.shard().hard.consumer.groups
    assert in_consumer is not downgrades
    ctx.step_check()


def test_upgrade_refusals() -> None:
    ctx = MCtx(CoordinatorConfig(offsets_topic_num_partitions=1, consumer_max_size=1))
    ctx.classic_group({"a": {"t1": {0}}, "b": {"t1": {1}}})
    r = ctx.hb("c", 0)
    assert r.error_code == E.group_id_not_found and "maximum size" in (r.error_message or "")
    other = MCtx()
    other.stable_group(1)  # the harness' bytes are no ConsumerProtocolAssignment
    r = other.hb("c", 0)
    assert r.error_code == E.group_id_not_found and "malformed" in (r.error_message or "")
    connect = MCtx()
    t = connect.join("", protocol_type="connect", require_known_member_id=False)
    connect.sleep_until(lambda: connect.reply(t) is not None)
    r = connect.hb("c", 0)
    assert r.error_code == E.group_id_not_found
    assert "consumer embedded protocol" in (r.error_message or "")
    assert connect.hb("c", 1).error_code == E.group_id_not_found  # only a join converts


def test_a_rebalancing_classic_group_answers_its_parked_requests_on_upgrade() -> None:
    ctx = MCtx()
    ids = ctx.classic_group({"a": {"t1": {0, 1}}, "b": {"t1": {2}}})
    parked = ctx.join(ids["a"], protocols=(("range", sub(("t1", "t2"))),))
    assert ctx.reply(parked) is None and ctx.state() is GroupState.PREPARING_REBALANCE
    ctx.hb("c", 0)
    r = ctx.join_reply(parked)
    assert r.error_code == E.rebalance_in_progress
    ctx.step_check()


def test_restart_reloads_a_mixed_group() -> None:
    ctx = MCtx()
    ids = _upgraded(ctx)
    j = ctx.cjoin(ids["a"], {})
    ctx.csync(ids["a"], j.generation_id)
    live = ctx.shard().hard.consumer
    fresh = CoordinatorShard(0, ctx.config)
    fresh.load([(r.key, r.value) for r in ctx.records], ctx.now)
    assert fresh.hard.consumer == live
    assert fresh.hard.consumer.groups["g"].members[ids["a"]].classic is not None
    ctx.coord.unload(0)
    ctx.coord.load(0, [(r.key, r.value) for r in ctx.records], ctx.now)
    a = ctx.member(ids["a"])
    assert ctx.chb(ids["a"], a.member_epoch) in (E.none, E.rebalance_in_progress)


def test_classic_member_metadata_record_layout() -> None:
    classic = ClassicMemberMetadata(45_000, (("range", b"\x00\x01"), ("rr", b"")))
    value = ConsumerGroupMemberMetadataValue("i", None, "c", "h", ("t",), None, 30_000, None,
                                             classic)
    key = ConsumerGroupMemberMetadataKey("g", "m")
    _, raw = serialize(key, value)
    assert raw is not None
    plain = serialize(key, ConsumerGroupMemberMetadataValue("i", None, "c", "h", ("t",), None,
                                                            30_000, None))[1]
    assert plain is not None and raw.startswith(plain[:-1])
    struct_ = (b"\x01" + (45_000).to_bytes(4, "big") + b"\x03" + b"\x06range\x03\x00\x01\x00"
               + b"\x03rr\x01\x00" + b"\x00")
    assert raw[len(plain) - 1:] == b"\x01\x00" + bytes([len(struct_)]) + struct_
    assert deserialize(serialize(key, value)[0], raw) == (key, value)
    assert deserialize(serialize(key, value)[0], plain) == (key, value.__class__(
        "i", None, "c", "h", ("t",), None, 30_000, None))


def test_group_epoch_record_of_an_upgrade_carries_the_generation() -> None:
    ctx = MCtx()
    ids = ctx.classic_group({"a": {"t1": {0}}})
    gen = ctx.describe().summary.generation
    ctx.hb("c", 0)
    epochs = [r.value for r in ctx.records if isinstance(r.key, ConsumerGroupMetadataKey)]
    assert epochs[0] is not None and epochs[0].epoch == gen  # type: ignore[union-attr]
    assert ids


def test_join_group_v0_style_join_without_member_id_requirement() -> None:
    ctx = MCtx()
    ctx.hb("c", 0)
    ev = JoinGroup("g", "", "consumer", (("range", sub()),), 10_000, 30_000, None, "k",
                   "/h", require_known_member_id=False)
    r = ctx.join_reply(ctx.call(ev))
    assert r.error_code == E.none and r.member_id in ctx.cgroup().members


def test_a_classic_member_rejoins_once_the_partition_it_waits_for_is_free() -> None:
    ctx = MCtx()
    ctx.hb("c", 0)  # a consumer group where c owns t1-0..2
    c_owned = as_dict(ctx.hb("c", 1, owned={}).assignment) or {T1: {0, 1, 2}}
    r = ctx.join_reply(ctx.join("", protocols=(("range", sub()),)))
    b = r.member_id
    j = ctx.cjoin(b, {})
    assert ctx.member(b).state is MemberState.UNRELEASED_PARTITIONS  # c still holds them
    code, got = ctx.csync(b, j.generation_id)
    assert code == E.none and got == {}
    assert ctx.chb(b, j.generation_id) == E.none  # still waiting: no point in rejoining
    r2 = ctx.hb("c", ctx.member("c").member_epoch, owned=c_owned)
    c_owned = as_dict(ctx.hb("c", r2.member_epoch, owned=as_dict(r2.assignment)).assignment
                      or r2.assignment)
    assert ctx.chb(b, j.generation_id) == E.rebalance_in_progress  # now it is free
    j2 = ctx.cjoin(b, {})
    code, got = ctx.csync(b, j2.generation_id)
    assert code == E.none and got and not set(got["t1"]) & c_owned.get(T1, set())
    ctx.step_check()


def test_switching_to_a_regex_resolved_for_others_rebalances() -> None:
    ctx = MCtx()
    ctx.hb("a", 0, regex="t.*", names=())
    ctx.hb("b", 0, regex="t1", names=())
    ctx.hb("c", 0, regex="t1", names=())  # keeps "t1" resolved after b's switch
    epoch = ctx.cgroup().epoch
    ctx.hb("b", ctx.member("b").member_epoch, regex="t.*", names=(), full=True)
    assert ctx.cgroup().epoch == epoch + 1  # Kafka bumps: the target must be recomputed
    assert T2 in ctx.cgroup().target["b"] or T2 in ctx.cgroup().target["a"]
