"""A seeded simulation of one share partition: members fetch, acknowledge (ACCEPT, RELEASE,
REJECT, RENEW, GAP), stall past their locks and leave while the clock moves, and ranges of
records turn out aborted (archived under read_committed); the timer service fires on time,
late, early, twice and after cancellation. After every step it checks
KIP-932's invariants against its own model of what each member was handed (the partition
keeps runs of offsets, Kafka's in-flight batches: acknowledging part of a run or with mixed
types splits it, an expiring lock releases whole runs):

* an offset is held by at most one member at a time;
* an ACCEPTed offset is never handed out again;
* no delivery count passes the limit;
* every lock whose deadline passed has released its offsets (no lost expiry);
* SPSO moves only over offsets acknowledged or archived;
* the window passes ``max_record_locks`` by less than a log batch (batch-optimized
  acquisition ends with a batch);
* the runs tile the window and each lock holds exactly the ACQUIRED runs naming it;
* replaying the durable updates gives the partition's durable state, it survives its
  ``__share_group_state`` snapshot encoding, and a partition rebuilt from it has the same
  durable state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from samsa.share import (
    AckType,
    DurableState,
    LockKey,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareUpdate,
)
from samsa.share.records import ShareSnapshot, decode_snapshot, encode_snapshot

OWNER = ("g", "t", 0)
LOG_BATCH = 4
"""Records per log batch; half the fetches acquire in batch-optimized mode (whole batches,
which may pass ``max_record_locks`` by less than one)."""


class SimTimer:
    """Deadline table; the simulation decides when (and how sloppily) keys fire."""

    def __init__(self) -> None:
        self.deadlines: dict[LockKey, int] = {}
        self.cancelled: set[LockKey] = set()

    def schedule(self, key: LockKey, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms
        self.cancelled.discard(key)

    def cancel(self, key: LockKey) -> None:
        if self.deadlines.pop(key, None) is not None:
            self.cancelled.add(key)


@dataclass
class Sim:
    seed: int
    members: int = 4
    config: SharePartitionConfig = field(
        default_factory=lambda: SharePartitionConfig(1_000, 3, 40))
    now: int = 0
    log_end: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.timer = SimTimer()
        self.part = SharePartition(OWNER, 0, self.timer, self.config)
        self.replayed = DurableState(0)
        #: the model: offset -> (member, delivery count) handed out and not yet given back
        self.held: dict[int, tuple[str, int]] = {}
        self.accepted: set[int] = set()
        self.finished: set[int] = set()  # accepted, rejected, gapped or archived by the limit
        self.counts: dict[int, int] = {}
        self.stats = {"acquired": 0, "expired": 0, "archived_by_limit": 0, "early": 0,
                      "aborted": 0, "partial": 0, "batch_expired": 0}

    # ------------------------------------------------------------------ steps

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.drain()

    def step(self) -> None:
        before = self.part.start_offset
        roll = self.rng.random()
        if roll < 0.15:
            self.log_end += self.rng.randint(1, 8)
        elif roll < 0.45:
            self.fetch(self._member())
        elif roll < 0.75:
            self.ack(self._member())
        elif roll < 0.78:
            self.leave(self._member())
        elif roll < 0.8:
            self.abort()
        else:
            self.tick(self.rng.choice((50, 200, 700, 1_500)))
        self.check(before)

    def _member(self) -> str:
        return f"m{self.rng.randrange(self.members)}"

    def fetch(self, member: str) -> None:
        ends = range(LOG_BATCH, self.log_end + LOG_BATCH, LOG_BATCH) \
            if self.rng.random() < 0.5 else ()
        got = self.part.acquire(member, self.log_end, self.rng.randint(1, 10), self.now, ends)
        for acq in got:
            assert acq.delivery_count <= self.config.delivery_count_limit
            for offset in range(acq.first_offset, acq.last_offset + 1):
                assert offset not in self.held, f"{offset} handed to {member}, held {self.held}"
                assert offset not in self.accepted, f"accepted {offset} redelivered"
                assert offset not in self.finished
                assert acq.delivery_count == self.counts.get(offset, 0) + 1
                self.counts[offset] = acq.delivery_count
                self.held[offset] = (member, acq.delivery_count)
                self.stats["acquired"] += 1

    def ack(self, member: str) -> None:
        mine = sorted(o for o, (m, _) in self.held.items() if m == member)
        if self.rng.random() < 0.1:  # somebody else's offset, or one not held at all
            offset = self.rng.randrange(max(self.log_end, 1))
            if self.held.get(offset, ("",))[0] != member:
                error, update = self.part.acknowledge(member, [(offset, offset, [1])], self.now)
                assert error != 0 and update is None
            return
        if not mine:
            return
        first = self.rng.choice(mine)
        last = first
        while last + 1 in mine and self.rng.random() < 0.7:
            last += 1
        n = last - first + 1
        if self.rng.random() < 0.5:
            types = [self._ack_type()]
        else:
            types = [self._ack_type() for _ in range(n)]
        runs = [r for r in self.part.runs.values()
                if r.first_offset <= last and r.last_offset >= first]
        if runs[0].first_offset < first or runs[-1].last_offset > last or \
                len(set(types)) > 1:
            self.stats["partial"] += 1  # part of a run: it splits
        error, update = self.part.acknowledge(member, [(first, last, types)], self.now)
        assert error == 0, error
        for i, offset in enumerate(range(first, last + 1)):
            ack = AckType(types[0] if len(types) == 1 else types[i])
            if ack is AckType.RENEW:
                continue
            _, count = self.held.pop(offset)
            if ack is AckType.ACCEPT:
                self.accepted.add(offset)
                self.finished.add(offset)
            elif ack in (AckType.REJECT, AckType.GAP):
                self.finished.add(offset)
            elif count >= self.config.delivery_count_limit:
                self.finished.add(offset)
                self.stats["archived_by_limit"] += 1
        self._replay(update)

    def _ack_type(self) -> int:
        return self.rng.choices([1, 2, 3, 4, 0], weights=[5, 3, 1, 1, 1])[0]

    def abort(self) -> None:
        """A range of records turns out aborted (read_committed): those not acquired nor
        done are archived and never handed out."""
        part = self.part
        if self.log_end <= part.start_offset:
            return
        first = self.rng.randrange(part.start_offset, self.log_end)
        last = min(first + self.rng.randint(0, 6), self.log_end - 1)
        room = part.start_offset + self.config.max_record_locks
        expect = []
        states = part.states()
        for offset in range(first, last + 1):
            rec = states.get(offset)
            if rec is None and offset >= room:
                break
            if rec is None or rec[0] is RecordState.AVAILABLE:
                expect.append(offset)
        update = part.archive([(first, last)])
        assert (update is None) == (not expect)
        states = part.states()
        for offset in expect:
            assert offset not in states or states[offset][0] is RecordState.ARCHIVED
            self.finished.add(offset)
        self.stats["aborted"] += len(expect)
        self._replay(update)

    def leave(self, member: str) -> None:
        update = self.part.release_member(member)
        self._give_back([o for o, (m, _) in self.held.items() if m == member])
        self._replay(update)

    def tick(self, ms: int) -> None:
        self.now += ms
        for key, deadline in sorted(self.timer.deadlines.items(), key=lambda kv: kv[1]):
            if deadline <= self.now:
                self._fire(key, self.now + self.rng.choice((0, 0, 30)))  # on time or late
                if self.rng.random() < 0.2:  # duplicate
                    self._fire(key, self.now)
            elif self.rng.random() < 0.1:  # early: the loop's clock ran ahead
                self.stats["early"] += 1
                self._fire(key, self.now)
                assert self.timer.deadlines.get(key) == deadline, "early fire lost its timer"
        for key in list(self.timer.cancelled)[:2]:  # stale fires of cancelled locks
            self._fire(key, self.now)

    def _fire(self, key: LockKey, now: int) -> None:
        self.timer.deadlines.pop(key, None)
        lock = self.part.locks.get(key.lock_id)
        due = lock is not None and lock.deadline_ms <= now
        expired = self.part.lock_offsets(key.lock_id) if lock is not None and due else []
        update = self.part.fire(key, now)
        if lock is not None and not due:
            assert update is None and key in self.timer.deadlines
            return
        if expired:
            assert update is not None
        self._give_back(expired)
        self.stats["expired"] += len(expired)
        if len(expired) > 1:
            self.stats["batch_expired"] += 1
        self._replay(update)

    def _give_back(self, offsets: list[int]) -> None:
        for offset in offsets:
            _, count = self.held.pop(offset)
            if count >= self.config.delivery_count_limit:
                self.finished.add(offset)
                self.stats["archived_by_limit"] += 1

    def drain(self) -> None:
        """Let every lock run out: nothing may stay acquired."""
        self.tick(self.config.record_lock_duration_ms * 2)
        self.check(self.part.start_offset)
        assert not self.held and self.part.count(RecordState.ACQUIRED) == 0
        assert not self.part.locks and not self.timer.deadlines

    def _replay(self, update: ShareUpdate | None) -> None:
        if update is not None:
            self.replayed.apply(update)

    # ------------------------------------------------------------------ invariants

    def check_runs(self) -> None:
        """The runs tile the window in order; each lock holds exactly the ACQUIRED runs
        that name it, all of one member."""
        part = self.part
        expect = part.start_offset
        for first in sorted(part.runs):
            run = part.runs[first]
            assert run.first_offset == first == expect and run.last_offset >= first
            expect = run.last_offset + 1
            if run.state is RecordState.ACQUIRED:
                assert first in part.locks[run.lock_id].runs
                assert part.locks[run.lock_id].member_id == run.member_id
            else:
                assert not run.lock_id and not run.member_id
        assert expect == max(part.end_offset, part.start_offset)
        for lock in part.locks.values():
            assert lock.runs and all(part.runs[f].state is RecordState.ACQUIRED
                                     for f in lock.runs)

    def check(self, start_before: int) -> None:
        part = self.part
        for offset in range(start_before, part.start_offset):
            assert offset in self.finished, f"SPSO moved over {offset}, not finished"
        states = part.states()
        assert sorted(states) == list(range(part.start_offset, part.end_offset))
        holders = {o: (member, count) for o, (state, count, member) in states.items()
                   if state is RecordState.ACQUIRED}
        assert holders == self.held
        assert part.available() == {o for o, (state, _, _) in states.items()
                                    if state is RecordState.AVAILABLE}
        for offset, (state, count, _) in states.items():
            assert count <= self.config.delivery_count_limit
            if state is RecordState.ACKNOWLEDGED:
                assert offset in self.accepted
        self.check_runs()
        for lock_id, lock in part.locks.items():
            key = LockKey(OWNER, lock_id)
            assert self.timer.deadlines.get(key) == lock.deadline_ms, "lock without a timer"
            assert lock.deadline_ms > self.now, "a lock outlived its deadline"
        assert part.end_offset - part.start_offset < self.config.max_record_locks + LOG_BATCH
        durable = part.durable()
        assert self.replayed == durable, (self.replayed, durable)
        snapshot = ShareSnapshot(0, durable.start_offset, durable.batches())
        assert decode_snapshot(encode_snapshot(snapshot)).durable() == durable
        assert part.state_batches() == durable.batches()
        rebuilt = SharePartition.from_durable(OWNER, durable, SimTimer(), self.config)
        assert rebuilt.durable() == durable
        assert not rebuilt.locks
