"""The rebalance history against the coordinator's own records, in the seeded simulations
(classic, consumer and mixed groups, with crashes, stalls, failed appends and fail-overs).

After every coordinator call: each generation bump (classic) and each group epoch record
that raises the epoch (consumer) has exactly one history event, written in the same result,
naming a cause; each member epoch bump reaches an epoch some event produced. The
simulations' own invariants also cover the history: replaying the records (history
included) rebuilds the live hard state.
"""

from __future__ import annotations

from typing import Any

from samsa.coordinator import Result
from samsa.coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
)
from samsa.coordinator.history import Cause, HistoryEvent, HistoryKey

from .simulation import (
    ConsumerSimulation,
    InvariantViolation,
    MixedSimulation,
    Simulation,
)

_Snapshot = tuple[dict[str, tuple[object, int]], dict[str, int], dict[tuple[str, str], int]]


class HistoryChecks:
    """Mixed into a simulation: checks the history after every absorbed result."""

    HISTORY_MAX_EVENTS = 50
    coord: Any
    bumps_checked = 0

    def _take(self) -> _Snapshot:
        shard = self.coord.shards.get(0)
        if shard is None:
            return {}, {}, {}
        classic = {gid: (g, g.generation) for gid, g in shard.groups.items()}
        consumer = {gid: g.epoch for gid, g in shard.hard.consumer.groups.items()}
        members = {(gid, mid): m.member_epoch for gid, g in shard.hard.consumer.groups.items()
                   for mid, m in g.members.items()}
        return classic, consumer, members

    def _absorb(self, result: Result) -> None:
        before = getattr(self, "_snapshot", None)
        super()._absorb(result)  # type: ignore[misc]
        if before is not None and not getattr(self, "_reloading", False):
            self._check_history(before, result)
        self._snapshot = self._take()

    def _reload(self) -> None:
        self._reloading = True
        try:
            super()._reload()  # type: ignore[misc]
        finally:
            self._reloading = False
        self._snapshot = self._take()

    def _written(self, result: Result, gid: str) -> dict[int, HistoryEvent]:
        out: dict[int, HistoryEvent] = {}
        for r in result.records:
            if isinstance(r.key, HistoryKey) and r.key.group == gid and r.value is not None:
                assert isinstance(r.value, HistoryEvent)
                out[r.value.seq] = r.value
        return out

    def _one_event(self, result: Result, gid: str, before: int, after: int,
                   kind: str) -> None:
        found = {seq: e for seq, e in self._written(result, gid).items()
                 if e.bumps and e.epoch_after == after
                 and (kind == "classic" or e.epoch_before == before)}
        if len(found) != 1:
            raise InvariantViolation(
                f"{kind} bump {before}->{after} of {gid} has {len(found)} history events")
        event = next(iter(found.values()))
        if event.cause is Cause.UNKNOWN:
            raise InvariantViolation(f"{kind} bump {before}->{after} of {gid}: no cause")
        self.bumps_checked += 1

    def _check_history(self, before: _Snapshot, result: Result) -> None:
        shard = self.coord.shards.get(0)
        if shard is None:
            return
        classic_before, consumer_before, members_before = before
        for gid, group in shard.groups.items():
            prev = classic_before.get(gid)
            if prev is not None and prev[0] is group:
                start = prev[1]
            else:  # created in this call, or converted from a consumer group at its epoch
                start = consumer_before.get(gid, 0) if prev is None else group.generation
            for generation in range(start + 1, group.generation + 1):
                self._one_event(result, gid, generation - 1, generation, "classic")
        epochs = dict(consumer_before)
        member_epochs = dict(members_before)
        for r in result.records:
            if isinstance(r.key, ConsumerGroupMetadataKey):
                gid = r.key.group
                if r.value is None:
                    epochs.pop(gid, None)
                    continue
                assert isinstance(r.value, ConsumerGroupMetadataValue)
                # a group created in this call starts at epoch 1 (KAFKA-20268), one
                # converted from a classic group at that group's generation (an empty one
                # at generation 0 is replaced by a new group)
                converted = classic_before.get(gid)
                current = epochs.get(gid, max(1, 0 if converted is None else converted[1]))
                if r.value.epoch > current:
                    self._one_event(result, gid, current, r.value.epoch, "consumer")
                epochs[gid] = r.value.epoch
            elif isinstance(r.key, ConsumerGroupCurrentMemberAssignmentKey) and isinstance(
                    r.value, ConsumerGroupCurrentMemberAssignmentValue):
                key = (r.key.group, r.key.member_id)
                epoch = r.value.member_epoch
                if epoch > max(member_epochs.get(key, 0), 0):
                    produced = {e.epoch_after for e in shard.hard.history.events(r.key.group)
                                if e.bumps}
                    if epoch not in produced and epoch != 1:  # 1: the group's first
                        # epoch (KAFKA-20268), a member's before any target was computed
                        raise InvariantViolation(
                            f"member {key} reached epoch {epoch}, which no event produced")
                member_epochs[key] = epoch


class ClassicHistorySimulation(HistoryChecks, Simulation):
    pass


class ConsumerHistorySimulation(HistoryChecks, ConsumerSimulation):
    pass


class MixedHistorySimulation(HistoryChecks, MixedSimulation):
    pass


def _run(sim: Any) -> Any:
    try:
        sim.run()
    except Exception as exc:
        tail = "\n".join(sim.log[-15:])
        raise AssertionError(f"{type(sim).__name__} seed {sim.seed} failed: {exc}\n"
                             f"{tail}") from exc
    return sim


def test_every_classic_generation_has_exactly_one_event() -> None:
    checked = 0
    for seed in range(60):
        checked += _run(ClassicHistorySimulation(seed)).bumps_checked
    assert checked > 200


def test_every_consumer_epoch_bump_has_exactly_one_event() -> None:
    checked = 0
    for seed in range(40):
        checked += _run(ConsumerHistorySimulation(seed)).bumps_checked
    assert checked > 200


def test_mixed_groups_keep_one_history_across_protocol_conversions() -> None:
    checked = upgrades = 0
    for seed in range(25):
        sim = _run(MixedHistorySimulation(seed))
        checked += sim.bumps_checked
        events = sim.coord.shards[0].hard.history.events("csim")
        upgrades += sum(e.cause is Cause.PROTOCOL_UPGRADE for e in events)
    assert checked > 100 and upgrades > 0
