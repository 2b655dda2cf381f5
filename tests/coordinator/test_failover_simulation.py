"""Deterministic coordinator failover (issue 14): the seeded simulation of
:mod:`tests.coordinator.failover_simulation` (three runtimes, one shared log per
``__consumer_offsets`` partition, leases with fencing epochs), as named scenarios and as
random seeds. Every run checks the invariants after every step (one leader per generation,
generations only grow, no partition owned twice, no acknowledged commit lost, a new owner
holds everything the old one wrote) and ends quiet: each group Stable, every subscribed
partition owned once, every request answered once.

Seed 001 ("在rebalance时的协调者故障", the coordinator failing during a rebalance) splits a
rebalance into five steps and says what happens if the coordinator fails at each:

1. *Notified* of a rebalance (topic change, new or dead consumer) but failed before acting:
   "the new coordinator reads the group's metadata (subscribed topics, previous partition
   ownership) and starts a rebalance if the partition counts disagree with that ownership,
   or if a consumer that connects has a different generation."
2. After answering *some* heartbeats with the rebalance error: "as in 1, the new coordinator
   detects the need and starts another rebalance; as soon as any consumer sends a
   JoinGroupRequest, it rebalances the whole group."
3. After receiving *some* JoinGroupRequests: "after fail-over it may receive heartbeats from
   all live consumers or JoinGroups from some; as in 1 it triggers a rebalance."
4. After *writing the new generation* and membership (one atomic write) but before any
   JoinGroupResponse: "consumers send heartbeats with the old generation; the coordinator
   answers IllegalGeneration and they rejoin."
5. After sending *some* JoinGroupResponses: "the consumers that got one notice the failure
   on their next heartbeat or commit, find the new coordinator and heartbeat with the new
   generation (answered without error); the others find it and send JoinGroupRequests,
   which triggers a rebalance."

Where the seed is wrong about real Kafka (checked against apache/kafka's
``GroupMetadataManager``, ``GroupCoordinatorService``, ``AbstractCoordinator``):

* 1: the coordinator never compares partition counts with the assignment; the consumer
  group *leader* watches metadata and rejoins (``ConsumerCoordinator.rejoinNeededOrPending``).
  A new coordinator loads the group as it was last written (Stable) and rebalances only when
  a member rejoins, its session expires, or (samsa, Kafka) the group is over its size limit.
* 2: a follower rejoining a Stable group with unchanged metadata gets the current generation
  back without a rebalance; only the leader's rejoin or changed metadata rebalances. The
  rebalance signal in heartbeats is REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION (that one
  means a stale generation).
* 4: Kafka does not write the generation before the JoinGroup responses: the join phase ends
  in memory (new generation, responses sent) and the group is written with its assignment
  when the leader's SyncGroup arrives (only an Empty group is written at once). So there
  are two cases here: ``generation_chosen`` (chosen, never written: lost with the
  coordinator, whose successor loads the previous generation and may hand the same number
  out again; no consumer ever owned anything under it, since a SyncGroup succeeds only
  after the write) and ``generation_written`` (the leader's SyncGroup was written, the sync
  answers were not sent: the successor loads the new generation, and the members' SyncGroup,
  Heartbeat or rejoin are answered from it).
* 5: for the same reason, the members holding a JoinGroup response cannot heartbeat with the
  new generation: their SyncGroup to the dead coordinator fails, they rediscover and rejoin
  (the Java client retries a failed sync by rejoining), and the new coordinator (which knows
  only the previous generation) answers a SyncGroup or Heartbeat carrying the lost
  generation with ILLEGAL_GENERATION.
* Loading: the seed says Heartbeat, OffsetCommit and JoinGroup get
  ``CoordinatorStartupNotComplete`` (now COORDINATOR_LOAD_IN_PROGRESS) and a JoinGroup
  ``IllegalProtocolState``. Kafka answers JoinGroup and OffsetCommit with
  COORDINATOR_LOAD_IN_PROGRESS, but a Heartbeat *blindly with NONE* and a SyncGroup with
  REBALANCE_IN_PROGRESS ("the group is still loading, so blindly respond").

The client side of seed 001 ("其他故障场景", "故障检测协议"), as the clients here behave:

* *Rediscover*: a consumer that gets NOT_COORDINATOR (seed: NotCoordinatorForGroup, e.g.
  from stale metadata) or COORDINATOR_NOT_AVAILABLE, or loses its connection, keeps
  consuming, asks any broker FindCoordinator (seed: ConsumerMetadataRequest) until one
  answers without error, and reconnects.
* *Rejoin*: "if the consumer reaches the new coordinator too late, the coordinator has marked
  it dead; when it joins again it is treated as a new consumer and a rebalance starts"
  (:func:`test_late_rediscovery_rejoins_as_a_new_member`: UNKNOWN_MEMBER_ID, rejoin without
  a member id).
* *Commit with a stale generation*: "the coordinator refuses an OffsetCommitRequest whose
  generation is not the group's" (:func:`test_commit_with_a_stale_generation_after_failover`:
  ILLEGAL_GENERATION; seed says only a *higher* generation is refused, Kafka refuses any
  other). The Java client also refuses to commit while not Stable.
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.coordinator import CommitPartition, CommitTopic, OffsetCommit, partition_for
from tests.coordinator import failover_simulation as fs
from tests.coordinator.failover_simulation import (
    DISCONNECT,
    GROUPS,
    HOWS,
    ILLEGAL_GEN,
    LOAD_MS,
    LOADING,
    NONE,
    NOT_AVAILABLE,
    NOT_COORDINATOR,
    SHARDS,
    STEPS,
    UNKNOWN_MEMBER,
    FailoverSimulation,
    error_of,
    run_failover_seed,
    run_scenario,
    settled,
)

LOST = {NOT_COORDINATOR, NOT_AVAILABLE, DISCONNECT}
SCENARIO_SEEDS = range(4)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("group", sorted(GROUPS))
@pytest.mark.parametrize("step", STEPS)
def test_failover_at_each_step_of_a_rebalance(step: str, group: str, how: str) -> None:
    """Seed 001's five steps (six cases, see the module docstring), each with a graceful
    hand-off, a crash of the owner, and a pause (the lease taken while the owner still
    serves, fenced on writes): the group settles, the invariants hold throughout."""
    for seed in SCENARIO_SEEDS:
        run = run_scenario(step, group, how, seed)
        sim = run.sim
        assert run.loaded, "the new owner never loaded the shard"
        if step == "generation_written":
            assert run.written == run.base_generation + 1
            assert run.loaded[0] == run.written  # the successor has what the old one wrote
        else:
            assert run.loaded[0] == run.base_generation  # nothing newer was ever written
        if step == "notified":
            assert run.told == 0
        if step == "some_heartbeats":
            assert run.told == 1
        # the clients rediscovered the coordinator and the group moved on
        codes = {c for _, _, c in run.answers}
        assert codes & LOST
        owner = sim.owner_runtime(partition_for(group, SHARDS))
        assert owner is not None
        final = sim.group_at(owner, group)
        assert final is not None and final.generation > run.base_generation


@pytest.mark.parametrize("how", HOWS)
def test_some_join_responses_nobody_syncs_under_the_lost_generation(how: str) -> None:
    """Step 5 in detail: with a crash, some members got the new generation and some did
    not (their joins were cut: a disconnect). Every successful SyncGroup matches a
    generation in the log (checked on each answer), so nobody syncs under the lost one; the
    successor, which loaded the previous generation, syncs the group again under its own."""
    for seed in SCENARIO_SEEDS:
        run = run_scenario("some_join_responses", "eager", how, seed)
        joins = [c for k, _, c in run.answers if k == "join"]
        if how == "crash":
            assert DISCONNECT in joins
        assert ("sync", NONE) in {(k, c) for k, _, c in run.answers}


def test_loading_answers_then_normal_service() -> None:
    """A new owner loads for LOAD_MS: JoinGroup and OffsetCommit are answered
    COORDINATOR_LOAD_IN_PROGRESS (the clients retry), Heartbeat NONE (Kafka's blind
    answer), and afterwards everything is answered from the replayed log."""
    seen: set[tuple[str, int]] = set()
    for seed in range(12):
        run = run_scenario("some_joins", "coop", "handoff", seed)
        seen |= {(k, c) for k, _, c in run.answers}
    assert ("join", LOADING) in seen or ("commit", LOADING) in seen
    assert ("heartbeat", LOADING) not in seen


def test_late_rediscovery_rejoins_as_a_new_member() -> None:
    """A consumer stalls through the fail-over for longer than its session: the new owner
    (whose session timers start at load) removes it and rebalances the others; when it
    wakes up, it rediscovers the coordinator, is told UNKNOWN_MEMBER_ID and rejoins as a
    new member."""
    for seed in range(4):
        sim = settled(seed)
        group = "eager"
        c = next(x for x in sim.clients if x.group == group)
        old_id = c.member_id
        answers: list[tuple[str, int]] = []

        def on_event(s: FailoverSimulation, what: str, payload: Any, name: str = c.name,
                     answers: list[tuple[str, int]] = answers) -> None:
            if what == "answer":
                _, token, response = payload
                sent = s.sent[token]
                if sent.client == name and sent.event is not None:
                    answers.append((getattr(sent.event, "member_id", ""), error_of(response)))

        sim.on_event = on_event
        c.stalled_until = sim.now + 30_000
        sim.fail_over(partition_for(group, SHARDS), "handoff", load_ms=LOAD_MS)
        while sim.now < c.stalled_until + 5_000:
            sim.step()
            sim.check()
        sim.quiet()
        sim.drain()
        assert (old_id, UNKNOWN_MEMBER) in answers
        assert c.member_id != old_id


@pytest.mark.parametrize("how", HOWS)
def test_commit_with_a_stale_generation_after_failover(how: str) -> None:
    """After a fail-over and a rebalance on the new owner, a commit carrying the generation
    of before is refused with ILLEGAL_GENERATION, and the commits acknowledged before
    (by the old owner) are all still there."""
    for seed in range(4):
        sim = settled(seed)
        group = "coop"
        p = partition_for(group, SHARDS)
        c = next(x for x in sim.clients if x.group == group)
        for _ in range(200):  # until the old owner acknowledged some commits
            if any(k[0] == group for k in sim.acked):
                break
            sim.step()
            sim.check()
        stale_generation, member_id = c.generation, c.member_id
        acked = {k for k in sim.acked if k[0] == group}
        assert acked
        sim.fail_over(p, how, load_ms=LOAD_MS)
        newcomer = sim._new_client(f"{group}9", group, True)
        sim.clients.append(newcomer)
        sim.start(newcomer)
        sim.quiet()
        assert c.generation > stale_generation and c.member_id == member_id
        before = dict(sim.logs[p].shadow.offsets[group])
        event = OffsetCommit(group, (CommitTopic("t0", (CommitPartition(0, 10**9),)),),
                             stale_generation, member_id)
        token = sim.send(c, "commit", event)
        sim.advance(10_000)
        assert error_of(sim.answered[token]) == ILLEGAL_GEN
        assert sim.logs[p].shadow.offsets[group] == before
        owner = sim.owner_runtime(p)
        assert owner is not None
        hard = owner.coord.shards[p].hard.offsets[group]
        assert all((t, part) in hard for _, t, part in acked)
        sim.check()


def test_a_paused_owner_cannot_write() -> None:
    """The lease moves while its owner is paused; the old owner, waking up, still answers
    reads, but a commit it accepts is refused by the log (stale epoch): the client gets
    COORDINATOR_NOT_AVAILABLE, the old owner unloads, and the log holds nothing from it."""
    for seed in range(4):
        sim = settled(seed)
        group = "eager"
        p = partition_for(group, SHARDS)
        c = next(x for x in sim.clients if x.group == group and x.owned)
        old = sim.logs[p].owner
        assert old is not None
        sim.fail_over(p, "pause", load_ms=LOAD_MS)
        sim.network = [e for e in sim.network if e[2] != "notice"]  # it never notices alone
        records = len(sim.logs[p].records)
        tp = sorted(c.owned)[0]
        event = OffsetCommit(group, (CommitTopic(tp.topic, (CommitPartition(
            tp.partition, 10**9),)),), c.generation, c.member_id)
        token = sim.send(c, "commit", event, runtime=old)
        sim.advance(6_000)
        assert error_of(sim.answered[token]) == NOT_AVAILABLE
        assert p not in sim.runtimes[old].coord.shards
        assert all(getattr(r.value, "offset", 0) != 10**9 for r in sim.logs[p].records[records:])
        sim.quiet()
        sim.drain()


def test_random_failovers() -> None:
    """Random seeds: ownership moves at random moments (hand-off, crash, pause), transient
    append failures, delays, client crashes, stalls, leaves and subscription changes."""
    stats = {"failovers": 0, "acked": 0, "fenced": 0}
    for seed in range(200):
        sim = run_failover_seed(seed)
        stats["failovers"] += sim.failovers
        stats["acked"] += sim.commits_acked
        stats["fenced"] += sum("fenced" in line for line in sim.log)
    assert stats["failovers"] > 1000 and stats["acked"] > 10_000 and stats["fenced"] > 100


def test_the_simulation_catches_a_log_without_fencing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The invariants can fail: with a log that takes appends from any runtime (no epoch
    check), a paused owner's writes go through and some seed breaks an invariant."""

    def append(self: fs.SharedLog, records: Any, runtime: int, epoch: int | None) -> bool:
        for r in records:
            self.records.append(r)
            self.shadow.replay(r.key, r.value)
        return True

    monkeypatch.setattr(fs.SharedLog, "append", append)
    failed = 0
    for seed in range(10):
        try:
            run_failover_seed(seed)
        except AssertionError:
            failed += 1
    assert failed > 0
