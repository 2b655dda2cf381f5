"""KIP-848 consumer groups in the seeded failover simulation (issue 26, item 7): see
:mod:`tests.coordinator.failover_consumers` for the members' behaviour and the invariants
checked after every step."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from samsa.coordinator import ConsumerGroupHeartbeat, ShardStatus, partition_for
from samsa.coordinator.shard import CoordinatorShard
from tests.coordinator.failover_consumers import (
    CONSUMER_GROUPS,
    CONSUMER_LEGAL,
    GROUP_NOT_FOUND,
    ConsumerFailoverSimulation,
    Member,
    run_consumer_failover_seed,
)
from tests.coordinator.failover_simulation import (
    LOAD_MS,
    NONE,
    NOT_COORDINATOR,
    SHARDS,
    error_of,
)


def test_random_failovers_with_consumer_groups() -> None:
    """Random seeds: leases move at random moments (hand-off, crash, pause) under classic
    and consumer-protocol groups sharing the shards, with failed appends, delays, member
    crashes, stalls, leaves and subscription changes."""
    answers: collections.Counter[tuple[str, int]] = collections.Counter()
    failovers = 0
    for seed in range(60):
        sim = run_consumer_failover_seed(seed)
        failovers += sim.failovers
        for token, sent in sim.sent.items():
            if sent.kind in CONSUMER_LEGAL:
                answers[sent.kind, error_of(sim.answered[token])] += 1
    assert failovers > 300
    assert answers["cgh", NONE] > 10_000 and answers["ccommit", NONE] > 2_000
    # the members lived through every kind of answer a fail-over gives
    assert {code for kind, code in answers if kind == "cgh"} >= {14, 15, 16, -1, 25}
    assert ("cgh", GROUP_NOT_FOUND) not in answers


def _late_group(p: int) -> str:
    return next(g for g in (f"late-{i}" for i in range(100))
                if partition_for(g, SHARDS) == p and g not in CONSUMER_GROUPS)


def test_a_paused_owner_never_tells_a_member_its_group_is_gone() -> None:
    """The lease of a shard moves while its owner is paused; a group created on the new
    owner has a member that, its connection broken, is sent back to the old owner by a
    stale metadata view. The old owner has never seen the group: before it answers
    GROUP_ID_NOT_FOUND (fatal for the member) it checks its lease, finds it gone, gives the
    shard up and answers NOT_COORDINATOR; the member finds the new owner and goes on."""
    for seed in range(4):
        sim = ConsumerFailoverSimulation(seed, churn=False)
        sim.quiet()
        sim.calm = False
        p = partition_for(CONSUMER_GROUPS[0], SHARDS)
        old = sim.logs[p].owner
        assert old is not None
        sim.fail_over(p, "pause", load_ms=LOAD_MS)
        sim.network = [e for e in sim.network if e[2] != "notice"]  # it never notices alone
        new = sim.logs[p].owner
        assert new is not None and new != old
        sim.advance(LOAD_MS + 100)
        m = Member("late", _late_group(p), ("t0", "t1"))
        sim.members.append(m)
        sim.start_member(m)
        m.coordinator, m.coordinator_incarnation = new, sim.runtimes[new].incarnation
        for _ in range(50):
            sim.step()
            sim.check()
            if m.status == "member" and m.owned:
                break
        assert m.status == "member" and m.epoch > 0
        sim.member_coordinator_unknown(m)
        token = sim.send(m, "cgh", ConsumerGroupHeartbeat(  # type: ignore[arg-type]
            group_id=m.group, member_id=m.member_id, member_epoch=m.epoch, client_id=m.name),
            runtime=old)
        m.hb = token
        sim.advance(6000)
        assert error_of(sim.answered[token]) == NOT_COORDINATOR
        assert p not in sim.runtimes[old].coord.shards
        sim.quiet()
        sim.drain()


def test_the_simulation_catches_group_id_not_found_while_loading(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The invariants can fail: with a shard that answers GROUP_ID_NOT_FOUND (instead of
    COORDINATOR_LOAD_IN_PROGRESS) while it loads, some seed breaks one."""
    status_error = CoordinatorShard._status_error

    def broken(self: CoordinatorShard, event: Any) -> int | None:
        if self.status is ShardStatus.LOADING and isinstance(event, ConsumerGroupHeartbeat):
            return GROUP_NOT_FOUND
        return status_error(self, event)

    monkeypatch.setattr(CoordinatorShard, "_status_error", broken)
    failed = 0
    for seed in range(10):
        try:
            run_consumer_failover_seed(seed)
        except AssertionError as exc:
            assert "is gone" in str(exc)
            failed += 1
    assert failed > 0
