"""One share partition's in-flight window (KIP-932), sans-I/O.

A share group reads a partition between the share-partition start offset (SPSO) and end
offset (SPEO). Every offset of that window has a state: AVAILABLE (may be acquired),
ACQUIRED (one member holds it under an acquisition lock), ACKNOWLEDGED or ARCHIVED (done).
Offsets before SPSO are done; offsets from SPEO on were never acquired. The window is kept
as runs of offsets sharing one state (:class:`InFlight`, Kafka's in-flight batches): an
acquisition of fresh records is one run, and a run splits only when part of it changes.

* :meth:`SharePartition.acquire` hands a member the AVAILABLE offsets of the window, then
  fresh ones past SPEO (while the window holds fewer than ``max_record_locks`` offsets;
  in batch-optimized mode up to the end of a log batch, which may pass that by less than
  a batch), each with its delivery count raised by one, under one new lock that expires
  ``record_lock_duration_ms`` later;
* :meth:`SharePartition.acknowledge` applies a member's ACCEPT / RELEASE / REJECT / RENEW /
  GAP to offsets it holds (all or none: any offset it does not hold fails the call with
  INVALID_RECORD_STATE);
* a RELEASE, an expired lock and :meth:`SharePartition.release_member` (the member left,
  died or closed its share session) make ACQUIRED offsets AVAILABLE again with their
  delivery count kept, or ARCHIVED once the count reached ``delivery_count_limit``, so a
  count never passes the limit;
* records rejected or archived at the limit are kept for :meth:`SharePartition.take_dead`
  (the edge copies them to a dead-letter topic, KIP-1191);
* :meth:`SharePartition.archive` archives records that must never be delivered (those of
  aborted transactions, under ``share.isolation.level=read_committed``);
* SPSO moves over the leading ACKNOWLEDGED/ARCHIVED offsets and never over others, except
  when the log itself no longer holds them (:meth:`SharePartition.skip_to`).

Locks run on keyed timers (:class:`LockKey`) through an injected :class:`LockTimer`, with
the coordinator's discipline: :meth:`SharePartition.fire` ignores a stale or duplicate fire
(the lock is gone), re-arms an early one (its deadline is still ahead), and expires a late
one as if on time, so no expiry is lost.

Durable state is what Kafka's share coordinator keeps (``__share_group_state``): SPSO and
the offsets that are not fresh (a state other than AVAILABLE, or a delivery count above 0),
an ACQUIRED offset counting as the AVAILABLE state it left. Each call that changes it
returns a :class:`ShareUpdate`; :meth:`DurableState.apply` replays updates, and
:meth:`SharePartition.from_durable` rebuilds a partition (after a restart or a leader move:
nothing acquired, nothing acknowledged lost).
"""

from __future__ import annotations

import enum
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode


class RecordState(enum.IntEnum):
    """A window offset's state (Kafka's values, as written to ``__share_group_state``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge acknowledge types (KIP-932; RENEW from KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True)
class SharePartitionConfig:
    """Kafka's broker defaults: ``group.share.record.lock.duration.ms``,
    ``group.share.delivery.count.limit``, ``group.share.partition.max.record.locks``."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


@dataclass(frozen=True)
class LockKey:
    """One acquisition lock's timer: the owning share partition's key and the lock id."""

    owner: Hashable
    lock_id: int


class LockTimer(Protocol):
    """What a share partition needs of the loop's timer service."""

    def schedule(self, key: LockKey, deadline_ms: int) -> None: ...

    def cancel(self, key: LockKey) -> None: ...


@dataclass(frozen=True)
class Acquired:
    """A range of offsets acquired in one call with one delivery count (ShareFetch's
    ``AcquiredRecords``)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """A range of offsets with one durable state and delivery count."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True)
class ShareUpdate:
    """A change of durable state: the new SPSO and the offsets (at or past it) whose durable
    state changed."""

    start_offset: int
    batches: tuple[StateBatch, ...] = ()


@dataclass(slots=True)
class InFlight:
    """A run of window offsets ``[first_offset, last_offset]`` with one state and delivery
    count and, while ACQUIRED, one holder and lock: Kafka's in-flight batch. A change to
    part of a run splits it (:meth:`SharePartition._cut`)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    lock_id: int = 0

    def durable(self, count_acquired: bool = False) -> tuple[RecordState, int]:
        if self.state is RecordState.ACQUIRED:
            return RecordState.AVAILABLE, self.delivery_count - (0 if count_acquired else 1)
        return self.state, self.delivery_count

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass
class _Lock:
    member_id: str
    deadline_ms: int
    #: the first offsets of the runs it holds
    runs: set[int] = field(default_factory=set)


@dataclass
class DurableState:
    """SPSO plus the non-fresh offsets' (state, delivery count): what survives a restart."""

    start_offset: int
    offsets: dict[int, tuple[RecordState, int]] = field(default_factory=dict)

    def apply(self, update: ShareUpdate) -> None:
        for batch in update.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                if batch.state is RecordState.AVAILABLE and batch.delivery_count == 0:
                    self.offsets.pop(offset, None)
                else:
                    self.offsets[offset] = (batch.state, batch.delivery_count)
        self.start_offset = max(self.start_offset, update.start_offset)
        for offset in [o for o in self.offsets if o < self.start_offset]:
            del self.offsets[offset]

    def batches(self) -> tuple[StateBatch, ...]:
        """The offsets as ranges of equal state and count (a snapshot's state batches)."""
        return tuple(_ranges(sorted(self.offsets.items())))


def _ranges(items: Iterable[tuple[int, tuple[RecordState, int]]]) -> Iterator[StateBatch]:
    first = last = -2
    key: tuple[RecordState, int] | None = None
    for offset, state_count in items:
        if offset == last + 1 and state_count == key:
            last = offset
            continue
        if key is not None:
            yield StateBatch(first, last, key[0], key[1])
        first = last = offset
        key = state_count
    if key is not None:
        yield StateBatch(first, last, key[0], key[1])


class SharePartition:
    """The in-flight window of one partition for one share group, on the partition's
    leader. Calls must be serialised; every call takes ``now_ms``.

    The window is kept as runs of offsets (:class:`InFlight`, keyed and sorted by their
    first offset), as Kafka's ``SharePartition`` keeps in-flight batches: acquiring fresh
    records makes one run, acknowledging, releasing or expiring a whole run changes one
    object, and only a change to part of a run splits it."""

    def __init__(self, owner: Hashable, start_offset: int, timer: LockTimer,
                 config: SharePartitionConfig | None = None) -> None:
        self.owner = owner
        self.config = config or SharePartitionConfig()
        self.timer = timer
        self.start_offset = start_offset
        self.end_offset = start_offset
        #: the window's runs by first offset, and their first offsets in ascending order
        self.runs: dict[int, InFlight] = {}
        self._firsts: list[int] = []
        #: first offsets of the AVAILABLE runs (so acquiring never walks the whole window)
        self._available: set[int] = set()
        self.locks: dict[int, _Lock] = {}
        self._next_lock = 1
        #: (offset, delivery count) of records rejected or archived at the delivery limit
        #: since the last :meth:`take_dead` (KIP-1191's dead-letter queue takes them)
        self.dead: list[tuple[int, int]] = []

    @classmethod
    def from_durable(cls, owner: Hashable, durable: DurableState, timer: LockTimer,
                     config: SharePartitionConfig | None = None) -> SharePartition:
        """Rebuild from durable state: SPEO follows the last non-fresh offset."""
        part = cls(owner, durable.start_offset, timer, config)
        if durable.offsets:
            last = max(durable.offsets)
            fresh = (RecordState.AVAILABLE, 0)
            first, key = part.start_offset, durable.offsets.get(part.start_offset, fresh)
            for offset in range(part.start_offset + 1, last + 2):
                now = durable.offsets.get(offset, fresh) if offset <= last else None
                if now != key:
                    part._append(InFlight(first, offset - 1, key[0], key[1]))
                    first, key = offset, now or fresh
            part.end_offset = last + 1
            part._advance_start()
        return part

    # ------------------------------------------------------------------ views

    def durable(self, *, count_acquired: bool = False) -> DurableState:
        """SPSO and the non-fresh offsets' (state, delivery count); ``count_acquired``: an
        ACQUIRED offset keeps the delivery it is in (saved on acquisition, so a new leader
        redelivers it with a higher count: the cluster)."""
        offsets: dict[int, tuple[RecordState, int]] = {}
        for batch in self.state_batches(count_acquired=count_acquired):
            key = (batch.state, batch.delivery_count)
            offsets.update(dict.fromkeys(range(batch.first_offset, batch.last_offset + 1),
                                         key))
        return DurableState(self.start_offset, offsets)

    def state_batches(self, *, count_acquired: bool = False) -> tuple[StateBatch, ...]:
        """The durable state as a snapshot's state batches (``durable().batches()``,
        straight from the runs; ``count_acquired`` as :meth:`durable`)."""
        out: list[StateBatch] = []
        for first in self._firsts:
            run = self.runs[first]
            state, count = run.durable(count_acquired)
            if state is RecordState.AVAILABLE and count == 0:
                continue
            if out and out[-1].last_offset + 1 == first and (
                    out[-1].state, out[-1].delivery_count) == (state, count):
                out[-1] = StateBatch(out[-1].first_offset, run.last_offset, state, count)
            else:
                out.append(StateBatch(first, run.last_offset, state, count))
        return tuple(out)

    def states(self) -> dict[int, tuple[RecordState, int, str]]:
        """Every window offset's (state, delivery count, holder) (for tests and tools)."""
        out: dict[int, tuple[RecordState, int, str]] = {}
        for run in self.runs.values():
            out.update(dict.fromkeys(range(run.first_offset, run.last_offset + 1),
                                     (run.state, run.delivery_count, run.member_id)))
        return out

    def available(self) -> set[int]:
        """The window's AVAILABLE offsets."""
        return {o for f in self._available for o in range(f, self.runs[f].last_offset + 1)}

    def next_fetch_offset(self) -> int:
        """Where a fetch should start reading the log: the first AVAILABLE offset of the
        window, else SPEO."""
        return min(self._available) if self._available else self.end_offset

    def count(self, state: RecordState) -> int:
        return sum(run.size for run in self.runs.values() if run.state is state)

    def held_by(self, member_id: str) -> list[int]:
        return sorted(o for lock in self.locks.values() if lock.member_id == member_id
                      for f in lock.runs for o in range(f, self.runs[f].last_offset + 1))

    def lock_offsets(self, lock_id: int) -> list[int]:
        """The offsets a lock holds."""
        lock = self.locks.get(lock_id)
        return [] if lock is None else sorted(
            o for f in lock.runs for o in range(f, self.runs[f].last_offset + 1))

    # ------------------------------------------------------------------ runs

    def _append(self, run: InFlight) -> None:
        """Add a run past the window's last."""
        self.runs[run.first_offset] = run
        self._firsts.append(run.first_offset)
        if run.state is RecordState.AVAILABLE:
            self._available.add(run.first_offset)
        if run.lock_id:
            self.locks[run.lock_id].runs.add(run.first_offset)

    def _cut(self, at: int) -> None:
        """Make ``at`` the first offset of a run (splitting the run holding it)."""
        i = bisect_right(self._firsts, at) - 1
        if i < 0:
            return
        run = self.runs[self._firsts[i]]
        if run.first_offset == at or run.last_offset < at:
            return
        tail = InFlight(at, run.last_offset, run.state, run.delivery_count, run.member_id,
                        run.lock_id)
        run.last_offset = at - 1
        self.runs[at] = tail
        self._firsts.insert(i + 1, at)
        if tail.state is RecordState.AVAILABLE:
            self._available.add(at)
        if tail.lock_id:
            self.locks[tail.lock_id].runs.add(at)

    def _span(self, first: int, last: int) -> list[InFlight]:
        """The runs that make up ``[first, last]`` (within the window), split to fit."""
        self._cut(first)
        self._cut(last + 1)
        i = bisect_left(self._firsts, first)
        j = bisect_right(self._firsts, last)
        return [self.runs[f] for f in self._firsts[i:j]]

    def _held(self, member_id: str, first: int, last: int) -> bool:
        """Every offset of ``[first, last]`` is ACQUIRED by ``member_id``."""
        if first < self.start_offset or last >= self.end_offset:
            return False
        i = bisect_right(self._firsts, first) - 1
        offset = first
        while offset <= last:
            run = self.runs[self._firsts[i]]
            if run.state is not RecordState.ACQUIRED or run.member_id != member_id:
                return False
            offset, i = run.last_offset + 1, i + 1
        return True

    # ------------------------------------------------------------------ acquire

    def acquire(self, member_id: str, log_end_offset: int, max_records: int,
                now_ms: int, batch_ends: Sequence[int] = ()) -> tuple[Acquired, ...]:
        """Acquire up to ``max_records`` offsets below ``log_end_offset`` (the end of what
        the fetch read) for ``member_id``: AVAILABLE window offsets first, then fresh
        offsets past SPEO (one new run) while the window has room. One lock covers them
        all. ``batch_ends`` (ascending: the offset after each log batch the fetch read;
        KIP-1206's batch-optimized mode) round the fresh run up to the end of the log batch
        its last offset is in, as Kafka does: the rest of that batch is sent anyway, and
        the window may pass ``max_record_locks`` by less than a batch."""
        budget = max(max_records, 0)
        picked: list[InFlight] = []
        for first in sorted(self._available):
            if budget <= 0 or first >= log_end_offset:
                break
            run = self.runs[first]
            self._cut(min(run.last_offset, log_end_offset - 1, first + budget - 1) + 1)
            picked.append(run)
            budget -= run.size
        room = self.start_offset + self.config.max_record_locks - self.end_offset
        fresh = min(budget, log_end_offset - self.end_offset, room)
        if fresh > 0 and batch_ends:
            i = bisect_right(batch_ends, self.end_offset + fresh - 1)
            if i < len(batch_ends):
                fresh = min(batch_ends[i], log_end_offset) - self.end_offset
        if not picked and fresh <= 0:
            return ()
        lock_id = self._new_lock(member_id, now_ms)
        lock = self.locks[lock_id]
        for run in picked:
            self._available.discard(run.first_offset)
            run.state, run.member_id, run.lock_id = RecordState.ACQUIRED, member_id, lock_id
            run.delivery_count += 1
            lock.runs.add(run.first_offset)
        if fresh > 0:
            run = InFlight(self.end_offset, self.end_offset + fresh - 1, RecordState.ACQUIRED,
                           1, member_id, lock_id)
            self._append(run)
            self.end_offset += fresh
            picked.append(run)
        out: list[Acquired] = []
        for run in picked:
            if out and out[-1].last_offset + 1 == run.first_offset and \
                    out[-1].delivery_count == run.delivery_count:
                out[-1] = Acquired(out[-1].first_offset, run.last_offset, run.delivery_count)
            else:
                out.append(Acquired(run.first_offset, run.last_offset, run.delivery_count))
        return tuple(out)

    def archive(self, ranges: Sequence[tuple[int, int]]) -> ShareUpdate | None:
        """``share.isolation.level=read_committed``: the offsets of ``(first, last)``
        ranges (records of aborted transactions) are never delivered. Those in the window
        and AVAILABLE become ARCHIVED; past SPEO the window grows over them (while it has
        room; the offsets it grows over before them come in AVAILABLE, as if fresh), so
        acquiring never takes them. Their delivery counts stay; they are no dead letters."""
        changed: list[tuple[int, int]] = []
        limit = self.start_offset + self.config.max_record_locks
        for first, last in sorted(ranges):
            first = max(first, self.start_offset)
            if first > last:
                continue
            if first < self.end_offset:
                for run in self._span(first, min(last, self.end_offset - 1)):
                    if run.state is RecordState.AVAILABLE:
                        self._available.discard(run.first_offset)
                        run.state = RecordState.ARCHIVED
                        changed.append((run.first_offset, run.last_offset))
            grow = max(first, self.end_offset)
            last = min(last, limit - 1)
            if grow > last:
                continue
            if self.end_offset < grow:  # the room before: fresh, AVAILABLE
                self._append(InFlight(self.end_offset, grow - 1, RecordState.AVAILABLE))
            self._append(InFlight(grow, last, RecordState.ARCHIVED))
            self.end_offset = last + 1
            changed.append((grow, last))
        return self._update(changed) if changed else None

    def _new_lock(self, member_id: str, now_ms: int) -> int:
        lock_id = self._next_lock
        self._next_lock += 1
        deadline = now_ms + self.config.record_lock_duration_ms
        self.locks[lock_id] = _Lock(member_id, deadline)
        self.timer.schedule(LockKey(self.owner, lock_id), deadline)
        return lock_id

    # ------------------------------------------------------------------ acknowledge

    def acknowledge(self, member_id: str,
                    batches: Sequence[tuple[int, int, Sequence[int]]],
                    now_ms: int) -> tuple[int, ShareUpdate | None]:
        """Apply ``(first_offset, last_offset, acknowledge_types)`` batches (one type for
        the whole range, or one per offset). Returns the error code (all or nothing) and the
        durable change, if any."""
        plan: list[tuple[int, int, AckType]] = []
        for first, last, types in batches:
            if last < first or len(types) not in (1, last - first + 1):
                return ErrorCode.invalid_request, None
            try:
                acks = [AckType(t) for t in types]
            except ValueError:
                return ErrorCode.invalid_request, None
            if not self._held(member_id, first, last):
                return ErrorCode.invalid_record_state, None
            if len(acks) == 1:
                plan.append((first, last, acks[0]))
                continue
            start = first
            for i in range(1, len(acks) + 1):  # runs of one type
                if i == len(acks) or acks[i] is not acks[start - first]:
                    plan.append((start, first + i - 1, acks[start - first]))
                    start = first + i
        changed: list[tuple[int, int]] = []
        renewed: list[tuple[int, int]] = []
        for first, last, ack in plan:
            if ack is AckType.RENEW:
                renewed.append((first, last))
                continue
            for run in self._span(first, last):
                self._unlock(run)
                if ack is AckType.ACCEPT:
                    run.state = RecordState.ACKNOWLEDGED
                elif ack is AckType.RELEASE:
                    self._make_available(run)
                else:  # REJECT, GAP
                    run.state = RecordState.ARCHIVED
                    if ack is AckType.REJECT:
                        self._dead(run)
                changed.append((run.first_offset, run.last_offset))
        if renewed:
            self._renew(member_id, renewed, now_ms)
        return ErrorCode.none, self._update(changed)

    def _renew(self, member_id: str, ranges: list[tuple[int, int]], now_ms: int) -> None:
        """KIP-1222: the offsets move to a fresh lock with a full lock duration."""
        lock_id = self._new_lock(member_id, now_ms)
        for first, last in ranges:
            for run in self._span(first, last):
                self._unlock(run)
                run.member_id, run.lock_id = member_id, lock_id
                self.locks[lock_id].runs.add(run.first_offset)

    def _unlock(self, run: InFlight) -> None:
        lock = self.locks.get(run.lock_id)
        if lock is not None:
            lock.runs.discard(run.first_offset)
            if not lock.runs:
                del self.locks[run.lock_id]
                self.timer.cancel(LockKey(self.owner, run.lock_id))
        run.member_id, run.lock_id = "", 0

    def _make_available(self, run: InFlight) -> None:
        run.member_id, run.lock_id = "", 0
        if run.delivery_count >= self.config.delivery_count_limit:
            run.state = RecordState.ARCHIVED
            self._dead(run)
        else:
            run.state = RecordState.AVAILABLE
            self._available.add(run.first_offset)

    def _dead(self, run: InFlight) -> None:
        self.dead.extend((o, run.delivery_count)
                         for o in range(run.first_offset, run.last_offset + 1))

    def take_dead(self) -> list[tuple[int, int]]:
        """The records rejected or archived at the delivery limit since the last call."""
        dead, self.dead = self.dead, []
        return dead

    # ------------------------------------------------------------------ release

    def fire(self, key: LockKey, now_ms: int) -> ShareUpdate | None:
        """A lock's timer fired: stale/duplicate fires are ignored, an early one re-arms,
        a due one releases the offsets still held under the lock."""
        lock = self.locks.get(key.lock_id)
        if key.owner != self.owner or lock is None:
            return None
        if lock.deadline_ms > now_ms:
            self.timer.schedule(key, lock.deadline_ms)
            return None
        del self.locks[key.lock_id]
        return self._release([lock])

    def release_member(self, member_id: str) -> ShareUpdate | None:
        """The member left, died or closed its share session: its offsets are released."""
        locks = []
        for lock_id, lock in list(self.locks.items()):
            if lock.member_id == member_id:
                locks.append(lock)
                del self.locks[lock_id]
                self.timer.cancel(LockKey(self.owner, lock_id))
        return self._release(locks) if locks else None

    def release_all(self) -> None:
        """Forget every lock (the partition is being dropped): cancels their timers."""
        for lock_id in self.locks:
            self.timer.cancel(LockKey(self.owner, lock_id))
        self.locks.clear()

    def _release(self, locks: Iterable[_Lock]) -> ShareUpdate | None:
        changed = []
        for first in sorted(f for lock in locks for f in lock.runs):
            run = self.runs[first]
            self._make_available(run)
            changed.append((first, run.last_offset))
        return self._update(changed)

    # ------------------------------------------------------------------ start offset

    def skip_to(self, offset: int) -> ShareUpdate | None:
        """The log no longer holds offsets below ``offset`` (retention, DeleteRecords): SPSO
        moves up to it, whatever their state, and their locks let them go."""
        if offset <= self.start_offset:
            return None
        self._cut(offset)
        gone = bisect_left(self._firsts, offset)
        for first in self._firsts[:gone]:
            run = self.runs.pop(first)
            self._available.discard(first)
            if run.state is RecordState.ACQUIRED:
                self._unlock(run)
        del self._firsts[:gone]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance_start()
        return ShareUpdate(self.start_offset)

    def _advance_start(self) -> bool:
        done = 0
        for first in self._firsts:
            run = self.runs[first]
            if run.state not in DONE:
                break
            del self.runs[first]
            self.start_offset = run.last_offset + 1
            done += 1
        del self._firsts[:done]
        if not self._firsts:
            self.start_offset = max(self.start_offset, self.end_offset)
        return done > 0

    def _update(self, changed: list[tuple[int, int]]) -> ShareUpdate | None:
        """The durable change after ``changed`` ranges changed state (SPSO moves first)."""
        moved = self._advance_start()
        kept = sorted((max(f, self.start_offset), last) for f, last in changed
                      if last >= self.start_offset)
        if not kept and not moved:
            return None
        out: list[StateBatch] = []
        covered = self.start_offset - 1
        for first, last in kept:
            first = max(first, covered + 1)
            if first > last:
                continue
            covered = last
            i = bisect_right(self._firsts, first) - 1
            while first <= last:
                run = self.runs[self._firsts[i]]
                end = min(run.last_offset, last)
                state, count = run.durable()
                if out and out[-1].last_offset + 1 == first and (
                        out[-1].state, out[-1].delivery_count) == (state, count):
                    out[-1] = StateBatch(out[-1].first_offset, end, state, count)
                else:
                    out.append(StateBatch(first, end, state, count))
                first, i = end + 1, i + 1
        return ShareUpdate(self.start_offset, tuple(out))
