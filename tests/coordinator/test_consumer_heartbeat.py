"""ConsumerGroupHeartbeat on the fake clock: joining, epochs, reconciliation, leaving."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode as E

from samsa.coordinator.consumer.group import ConsumerGroupState, MemberState

from .consumer_ctx import T1, T2, CCtx, as_dict


def test_first_member_gets_every_partition_and_epoch_2() -> None:
    """KAFKA-20268: a new group starts at epoch 1 (an empty target); its first member's
    join bumps it to 2, the first computed target."""
    ctx = CCtx()
    r = ctx.hb("a", 0, names=("t1", "t2"))
    assert r.error_code == 0 and r.member_id == "a" and r.member_epoch == 2
    assert r.heartbeat_interval_ms == 5000
    assert as_dict(r.assignment) == {T1: {0, 1, 2}, T2: {0, 1}}
    group = ctx.cgroup()
    assert (group.epoch, group.assignment_epoch, group.state) == (2, 2, ConsumerGroupState.STABLE)
    assert ctx.timer.deadlines  # the session timer
    # a plain heartbeat (nothing changed) carries no assignment
    r = ctx.hb("a", 2)
    assert r.error_code == 0 and r.member_epoch == 2 and r.assignment is None


def test_v0_member_id_is_made_by_the_coordinator() -> None:
    ctx = CCtx()
    r = ctx.hb("", 0, api_version=0)
    assert r.error_code == 0 and r.member_id == "c-1"
    assert "c-1" in ctx.cgroup().members


def test_revoke_before_assign_and_never_two_owners() -> None:
    ctx = CCtx()
    a = ctx.hb("a", 0)
    owned = {"a": as_dict(a.assignment)}
    assert owned["a"] == {T1: {0, 1, 2}}
    # b joins: the target moves partitions to b, but a still owns them
    b = ctx.hb("b", 0)
    assert b.error_code == 0 and b.member_epoch == 3 and as_dict(b.assignment) == {}
    assert ctx.member("b").state is MemberState.UNRELEASED_PARTITIONS
    target_b = ctx.cgroup().target["b"]
    assert target_b and ctx.cgroup().state is ConsumerGroupState.RECONCILING
    # a is told to revoke first, and stays in epoch 2
    r = ctx.hb("a", 2, owned=owned["a"])
    assert r.member_epoch == 2 and ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    kept = as_dict(r.assignment)
    assert kept[T1] == owned["a"][T1] - target_b[T1]
    ctx.owners()
    # b asks again while a has not revoked: still nothing
    assert as_dict(ctx.hb("b", 3, owned={}).assignment) == {}
    # a keeps reporting the revoked partitions: no progress
    assert ctx.hb("a", 2, owned=owned["a"]).member_epoch == 2
    # a revokes: it moves to epoch 3; then b gets its partitions
    r = ctx.hb("a", 2, owned=kept)
    assert r.member_epoch == 3 and ctx.member("a").state is MemberState.STABLE
    r = ctx.hb("b", 3, owned={})
    assert as_dict(r.assignment) == {T1: set(target_b[T1])}
    assert ctx.cgroup().state is ConsumerGroupState.STABLE
    assert len(ctx.owners()) == 3


def test_many_members_settle_with_every_partition_once() -> None:
    ctx = CCtx()
    owned: dict[str, dict[uuid.UUID, set[int]]] = {}
    for i in range(4):
        r = ctx.hb(f"m{i}", 0, names=("t1", "t2"))
        owned[f"m{i}"] = as_dict(r.assignment)
        ctx.owners()
    ctx.settle(owned)
    group = ctx.cgroup()
    assert group.state is ConsumerGroupState.STABLE
    assert len(ctx.owners()) == 5
    assert all(m.member_epoch <= group.epoch for m in group.members.values())


def test_previous_epoch_with_a_subset_is_accepted() -> None:
    """The response that bumped the epoch was lost: the member retries with the previous
    epoch and owns no more than its assignment."""
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    ctx.hb("a", 2, owned={T1: {0, 1, 2}})
    kept = {t: set(ps) for t, ps in ctx.member("a").assigned.items()}
    ctx.hb("a", 2, owned=kept)  # now epoch 3, previous 2
    assert ctx.member("a").member_epoch == 3
    r = ctx.hb("a", 2, owned=kept)
    assert r.error_code == 0 and r.member_epoch == 3
    r = ctx.hb("a", 2, owned={T1: {0, 1, 2}})
    assert r.error_code == E.fenced_member_epoch


def test_leave_bumps_the_epoch_and_frees_partitions() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    r = ctx.hb("a", -1)
    assert r.error_code == 0 and r.member_id == "a" and r.member_epoch == -1
    group = ctx.cgroup()
    # the leave asked for the next target at once (a job): it is there for b's heartbeat
    assert "a" not in group.members and group.epoch == group.assignment_epoch == 4
    assert group.state is ConsumerGroupState.RECONCILING
    r = ctx.hb("b", ctx.member("b").member_epoch, owned={})
    assert as_dict(r.assignment) == {T1: {0, 1, 2}} and r.member_epoch == 4
    assert ctx.hb("b", -1).error_code == 0
    assert ctx.cgroup().state is ConsumerGroupState.EMPTY


def test_rejoin_with_epoch_0_after_being_fenced() -> None:
    """KAFKA-19233: a member that lost its epoch rejoins with 0 under the same id."""
    ctx = CCtx()
    ctx.hb("a", 0)
    assert ctx.hb("a", 7).error_code == E.fenced_member_epoch
    r = ctx.hb("a", 0)
    assert r.error_code == 0 and r.member_epoch == 2 and as_dict(r.assignment) == {T1: {0, 1, 2}}


def test_session_timeout_fences_the_member() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    ctx.sleep(44_000)
    ctx.hb("b", ctx.member("b").member_epoch, owned={})
    ctx.sleep(2_000)
    group = ctx.cgroup()
    assert set(group.members) == {"b"} and group.epoch == 4


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, rebalance_ms=10_000)
    ctx.hb("b", 0)
    ctx.hb("a", 2, owned={T1: {0, 1, 2}})
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    ctx.sleep(9_000)
    assert "a" in ctx.cgroup().members
    ctx.hb("b", 3, owned={})
    ctx.sleep(1_500)
    assert "a" not in ctx.cgroup().members
    r = ctx.hb("b", 3, owned={})
    assert r.member_epoch == 4 and as_dict(r.assignment) == {T1: {0, 1, 2}}


def test_a_member_that_revokes_in_time_is_not_fenced() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, rebalance_ms=10_000)
    ctx.hb("b", 0)
    r = ctx.hb("a", 2, owned={T1: {0, 1, 2}})
    ctx.hb("a", 2, owned=as_dict(r.assignment))
    ctx.sleep(20_000)
    assert "a" in ctx.cgroup().members


def test_subscription_change_bumps_the_epoch_and_reassigns() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, names=("t1",))
    r = ctx.hb("a", 2, names=("t2",), owned={T1: {0, 1, 2}})
    # t1 must be revoked before t2 is given
    assert r.member_epoch == 2 and as_dict(r.assignment) == {}
    r = ctx.hb("a", 2, owned={})
    assert r.member_epoch == 3 and as_dict(r.assignment) == {T2: {0, 1}}


def test_server_assignor_and_rack_are_kept() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, assignor="range", rack_id="r1")
    m = ctx.member("a")
    assert (m.server_assignor, m.rack_id) == ("range", "r1")
    ctx.hb("a", 2)  # null: unchanged
    assert ctx.member("a").server_assignor == "range"


def test_a_steady_heartbeat_writes_nothing_but_a_changed_client_is_recorded() -> None:
    """A heartbeat that changes nothing is answered without a record; one from another
    client id or host, or with a new rack, rewrites the member's metadata (as Kafka)."""
    from dataclasses import replace

    from samsa.coordinator.consumer.records import ConsumerGroupMemberMetadataKey
    from samsa.coordinator.events import ConsumerGroupHeartbeat

    ctx = CCtx()
    ctx.hb("a", 0)
    steady = ConsumerGroupHeartbeat("g", "a", 2, client_id="c", client_host="/127.0.0.1")
    for change in ({}, {"rebalance_timeout_ms": 30_000}, {"subscribed_topic_names": ("t1",)}):
        result = ctx.coord.handle(replace(steady, **change), ctx.now, object())
        ctx.absorb(result)
        assert result.records == () and result.replies[0].response.error_code == 0
    for change in ({"client_id": "other"}, {"client_host": "/10.0.0.2"}, {"rack_id": "r1"}):
        result = ctx.coord.handle(replace(steady, **change), ctx.now, object())
        ctx.absorb(result)
        assert [type(r.key) for r in result.records] == [ConsumerGroupMemberMetadataKey]
        member = ctx.member("a")
        assert all(getattr(member, k) == v for k, v in change.items())
