"""Member, generation and protocol checks; loading logs written by other coordinators."""

from __future__ import annotations

from samsa.coordinator import (
    CoordinatorShard,
    FetchGroup,
    GroupState,
    OffsetFetch,
    SyncGroup,
)
from samsa.coordinator.records import deserialize, encode_offset_commit_key, serialize
from samsa.coordinator.responses import HeartbeatResponse, OffsetFetchResponse

from .harness import Ctx

S = GroupState
UNKNOWN_MEMBER, ILLEGAL_GEN, INCONSISTENT = 25, 22, 23


def test_heartbeat_checks_member_then_generation() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    assert ctx.reply(ctx.heartbeat("x", gen)) == HeartbeatResponse(UNKNOWN_MEMBER)
    assert ctx.reply(ctx.heartbeat(a, gen + 1)) == HeartbeatResponse(ILLEGAL_GEN)
    assert ctx.reply(ctx.heartbeat(a, gen, instance_id="nope")) == HeartbeatResponse(UNKNOWN_MEMBER)


def test_sync_checks_generation_protocol_type_and_name() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    assert ctx.sync_reply(ctx.sync(a, gen - 1)).error_code == ILLEGAL_GEN
    t = ctx.call(SyncGroup("g", gen, a, protocol_type="connect"))
    assert ctx.sync_reply(t).error_code == INCONSISTENT
    t = ctx.call(SyncGroup("g", gen, a, protocol_type="consumer", protocol_name="sticky"))
    assert ctx.sync_reply(t).error_code == INCONSISTENT
    t = ctx.call(SyncGroup("g", gen, a, protocol_type="consumer", protocol_name="range"))
    assert ctx.sync_reply(t).error_code == 0


def test_known_member_join_with_other_protocol_type_is_inconsistent() -> None:
    ctx = Ctx()
    (a,), _ = ctx.stable_group(1)
    r = ctx.join_reply(ctx.join(a, protocol_type="connect"))
    assert (r.error_code, r.member_id) == (INCONSISTENT, a)


def test_require_stable_fetch_answers_committed_offsets() -> None:
    ctx = Ctx()
    ctx.commit({("t", 0): 4})
    r = ctx.reply(ctx.call(OffsetFetch((FetchGroup("g"),), require_stable=True)))
    assert isinstance(r, OffsetFetchResponse)
    assert r.groups[0].topics[0].partitions[0].committed_offset == 4


def test_load_skips_records_of_other_coordinators_and_applies_tombstones() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    ctx.commit({("t", 0): 1, ("t", 1): 2}, a, gen)
    log = [serialize(r.key, r.value) for r in ctx.records]
    log.insert(0, (b"\x00\x11\x00\x01g", b"\x00\x00whatever"))  # e.g. a streams group record
    log.append((encode_offset_commit_key("g", "t", 1), None))
    shard = CoordinatorShard(0)
    shard.load([rec for raw in log if (rec := deserialize(*raw)) is not None], 0)
    assert set(shard.hard.offsets["g"]) == {("t", 0)}
    assert shard.groups["g"].state is S.STABLE
    assert shard.groups["g"].generation == gen
