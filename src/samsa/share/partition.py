"""One share partition's in-flight window (KIP-932), sans-I/O.

A share group reads a partition between the share-partition start offset (SPSO) and end
offset (SPEO). Every offset of that window has a state: AVAILABLE (may be acquired),
ACQUIRED (one member holds it under an acquisition lock), ACKNOWLEDGED or ARCHIVED (done).
Offsets before SPSO are done; offsets from SPEO on were never acquired.

* :meth:`SharePartition.acquire` hands a member the AVAILABLE offsets of the window, then
  fresh ones past SPEO (while the window holds fewer than ``max_record_locks`` offsets),
  each with its delivery count raised by one, under one new lock that expires
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
    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    lock_id: int = 0

    def durable(self) -> tuple[RecordState, int]:
        if self.state is RecordState.ACQUIRED:
            return RecordState.AVAILABLE, self.delivery_count - 1
        return self.state, self.delivery_count


@dataclass
class _Lock:
    member_id: str
    deadline_ms: int
    offsets: set[int] = field(default_factory=set)


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
    leader. Calls must be serialised; every call takes ``now_ms``."""

    def __init__(self, owner: Hashable, start_offset: int, timer: LockTimer,
                 config: SharePartitionConfig | None = None) -> None:
        self.owner = owner
        self.config = config or SharePartitionConfig()
        self.timer = timer
        self.start_offset = start_offset
        self.end_offset = start_offset
        #: window offsets in ascending order (inserted in order, removed from the front)
        self.window: dict[int, InFlight] = {}
        #: the window's AVAILABLE offsets (so acquiring never walks the whole window)
        self.available: set[int] = set()
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
            for offset in range(part.start_offset, last + 1):
                state, count = durable.offsets.get(offset, (RecordState.AVAILABLE, 0))
                part.window[offset] = InFlight(state, count)
                if state is RecordState.AVAILABLE:
                    part.available.add(offset)
            part.end_offset = last + 1
            part._advance_start()
        return part

    # ------------------------------------------------------------------ views

    def durable(self) -> DurableState:
        offsets = {o: r.durable() for o, r in self.window.items()}
        return DurableState(self.start_offset, {
            o: sc for o, sc in offsets.items() if sc != (RecordState.AVAILABLE, 0)})

    def next_fetch_offset(self) -> int:
        """Where a fetch should start reading the log: the first AVAILABLE offset of the
        window, else SPEO."""
        return min(self.available) if self.available else self.end_offset

    def count(self, state: RecordState) -> int:
        return sum(1 for rec in self.window.values() if rec.state is state)

    def held_by(self, member_id: str) -> list[int]:
        return sorted(o for lock in self.locks.values() if lock.member_id == member_id
                      for o in lock.offsets)

    # ------------------------------------------------------------------ acquire

    def acquire(self, member_id: str, log_end_offset: int, max_records: int,
                now_ms: int) -> tuple[Acquired, ...]:
        """Acquire up to ``max_records`` offsets below ``log_end_offset`` (the end of what
        the fetch read) for ``member_id``: AVAILABLE window offsets first, then fresh
        offsets past SPEO while the window has room. One lock covers them all."""
        picked = sorted(o for o in self.available if o < log_end_offset)[:max(max_records, 0)]
        room = self.start_offset + self.config.max_record_locks - self.end_offset
        fresh = min(max_records - len(picked), log_end_offset - self.end_offset, room)
        if not picked and fresh <= 0:
            return ()
        lock_id = self._new_lock(member_id, now_ms)
        lock = self.locks[lock_id]
        for offset in picked:
            rec = self.window[offset]
            self.available.discard(offset)
            rec.state, rec.member_id, rec.lock_id = RecordState.ACQUIRED, member_id, lock_id
            rec.delivery_count += 1
            lock.offsets.add(offset)
        for _ in range(max(fresh, 0)):
            offset = self.end_offset
            self.window[offset] = InFlight(RecordState.ACQUIRED, 1, member_id, lock_id)
            lock.offsets.add(offset)
            picked.append(offset)
            self.end_offset += 1
        return tuple(self._acquired_ranges(picked))

    def archive(self, ranges: Sequence[tuple[int, int]]) -> ShareUpdate | None:
        """``share.isolation.level=read_committed``: the offsets of ``(first, last)``
        ranges (records of aborted transactions) are never delivered. Those in the window
        and AVAILABLE become ARCHIVED; past SPEO the window grows over them (while it has
        room; the offsets it grows over before them come in AVAILABLE, as if fresh), so
        acquiring never takes them. Their delivery counts stay; they are no dead letters."""
        changed: list[int] = []
        limit = self.start_offset + self.config.max_record_locks
        for first, last in sorted(ranges):
            for offset in range(max(first, self.start_offset), last + 1):
                rec = self.window.get(offset)
                if rec is None:
                    if offset >= limit:
                        break
                    while self.end_offset < offset:  # the room before: fresh, AVAILABLE
                        self.window[self.end_offset] = InFlight(RecordState.AVAILABLE)
                        self.available.add(self.end_offset)
                        self.end_offset += 1
                    rec = self.window[offset] = InFlight(RecordState.AVAILABLE)
                    self.end_offset = offset + 1
                elif rec.state is not RecordState.AVAILABLE:
                    continue
                self.available.discard(offset)
                rec.state = RecordState.ARCHIVED
                changed.append(offset)
        return self._update(changed) if changed else None

    def _acquired_ranges(self, offsets: list[int]) -> Iterator[Acquired]:
        runs = _ranges((o, (RecordState.ACQUIRED, self.window[o].delivery_count))
                       for o in offsets)
        for run in runs:
            yield Acquired(run.first_offset, run.last_offset, run.delivery_count)

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
        plan: list[tuple[int, AckType]] = []
        for first, last, types in batches:
            if last < first or len(types) not in (1, last - first + 1):
                return ErrorCode.invalid_request, None
            for i, offset in enumerate(range(first, last + 1)):
                try:
                    ack = AckType(types[0] if len(types) == 1 else types[i])
                except ValueError:
                    return ErrorCode.invalid_request, None
                rec = self.window.get(offset)
                if (rec is None or rec.state is not RecordState.ACQUIRED
                        or rec.member_id != member_id):
                    return ErrorCode.invalid_record_state, None
                plan.append((offset, ack))
        changed: list[int] = []
        renewed: list[int] = []
        for offset, ack in plan:
            if ack is AckType.RENEW:
                renewed.append(offset)
                continue
            rec = self.window[offset]
            self._unlock(offset, rec)
            if ack is AckType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
            elif ack is AckType.RELEASE:
                self._make_available(offset, rec)
            else:  # REJECT, GAP
                rec.state = RecordState.ARCHIVED
                if ack is AckType.REJECT:
                    self.dead.append((offset, rec.delivery_count))
            changed.append(offset)
        if renewed:
            self._renew(member_id, renewed, now_ms)
        return ErrorCode.none, self._update(changed)

    def _renew(self, member_id: str, offsets: list[int], now_ms: int) -> None:
        """KIP-1222: the offsets move to a fresh lock with a full lock duration."""
        lock_id = self._new_lock(member_id, now_ms)
        for offset in offsets:
            rec = self.window[offset]
            self._unlock(offset, rec)
            rec.member_id, rec.lock_id = member_id, lock_id
            self.locks[lock_id].offsets.add(offset)

    def _unlock(self, offset: int, rec: InFlight) -> None:
        lock = self.locks.get(rec.lock_id)
        if lock is not None:
            lock.offsets.discard(offset)
            if not lock.offsets:
                del self.locks[rec.lock_id]
                self.timer.cancel(LockKey(self.owner, rec.lock_id))
        rec.member_id, rec.lock_id = "", 0

    def _make_available(self, offset: int, rec: InFlight) -> None:
        limited = rec.delivery_count >= self.config.delivery_count_limit
        rec.state = RecordState.ARCHIVED if limited else RecordState.AVAILABLE
        rec.member_id, rec.lock_id = "", 0
        if limited:
            self.dead.append((offset, rec.delivery_count))
        else:
            self.available.add(offset)

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
        return self._release(lock.offsets)

    def release_member(self, member_id: str) -> ShareUpdate | None:
        """The member left, died or closed its share session: its offsets are released."""
        offsets: set[int] = set()
        for lock_id, lock in list(self.locks.items()):
            if lock.member_id == member_id:
                offsets |= lock.offsets
                del self.locks[lock_id]
                self.timer.cancel(LockKey(self.owner, lock_id))
        return self._release(offsets) if offsets else None

    def release_all(self) -> None:
        """Forget every lock (the partition is being dropped): cancels their timers."""
        for lock_id in self.locks:
            self.timer.cancel(LockKey(self.owner, lock_id))
        self.locks.clear()

    def _release(self, offsets: Iterable[int]) -> ShareUpdate | None:
        changed = sorted(offsets)
        for offset in changed:
            self._make_available(offset, self.window[offset])
        return self._update(changed)

    # ------------------------------------------------------------------ start offset

    def skip_to(self, offset: int) -> ShareUpdate | None:
        """The log no longer holds offsets below ``offset`` (retention, DeleteRecords): SPSO
        moves up to it, whatever their state, and their locks let them go."""
        if offset <= self.start_offset:
            return None
        for gone in [o for o in self.window if o < offset]:
            rec = self.window.pop(gone)
            self.available.discard(gone)
            if rec.state is RecordState.ACQUIRED:
                self._unlock(gone, rec)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance_start()
        return ShareUpdate(self.start_offset)

    def _advance_start(self) -> bool:
        moved = False
        while self.window:
            offset = next(iter(self.window))
            if self.window[offset].state not in DONE:
                break
            del self.window[offset]
            self.start_offset = offset + 1
            moved = True
        if not self.window:
            self.start_offset = max(self.start_offset, self.end_offset)
        return moved

    def _update(self, changed: list[int]) -> ShareUpdate | None:
        moved = self._advance_start()
        kept = [o for o in changed if o >= self.start_offset]
        if not kept and not moved:
            return None
        batches = _ranges(sorted((o, self.window[o].durable()) for o in kept))
        return ShareUpdate(self.start_offset, tuple(batches))
