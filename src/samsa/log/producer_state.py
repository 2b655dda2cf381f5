"""Idempotent-producer state: sequence and epoch checks, as Kafka 3.x does them.

Pure data and functions; the partition log stages updates per append and commits them
after the write. Rules (Kafka's ``ProducerStateEntry`` / ``ProducerAppendInfo``):

* An older epoch than the producer's current one: INVALID_PRODUCER_EPOCH (47).
* Same epoch and the same (first, last) sequence as one of the last 5 batches: a duplicate;
  the broker answers success with that batch's original offsets.
* Same epoch: the first sequence must follow the last one (wrapping from int32 max to 0),
  else OUT_OF_ORDER_SEQUENCE_NUMBER (45).
* A newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
* A batch without a sequence (-1: the transactional offsets a group coordinator writes, as
  Kafka's coordinator appends) has its epoch checked only.
* An unknown producer id (never seen, or its batches were all removed by retention) is
  accepted at any sequence: since KIP-360 (Kafka 2.5) brokers no longer answer
  UNKNOWN_PRODUCER_ID (59) on produce.

Control batches (transaction markers) are not checked; a marker at a newer epoch (the
coordinator fenced the producer or, with KIP-890, bumped its epoch at the transaction's end)
moves the producer to that epoch, so the next batch starts at sequence 0 and the older
epoch is refused.

Transactions (Kafka's ``ProducerStateManager`` ongoing transactions and ``.txnindex``): a
transactional batch opens its producer's transaction at its base offset, a marker closes it;
an aborted one is kept as (producer id, first offset, marker offset) for read_committed
fetches. The last stable offset is the first offset of the oldest open transaction (or the
high watermark). The state is rebuilt with the producer state when a log opens
(:meth:`ProducerStateManager.replay` with the marker's type).

Verification guards (KIP-890 part 1, Kafka's ``VerificationGuard``): before a leader asks
the transaction coordinator whether a producer's first transactional batch may open a
transaction here, it takes a guard (:meth:`ProducerStateManager.start_verification`); a
marker for that producer, or the batch that opens its transaction, drops every guard of
the producer, so a batch verified before a marker closed the transaction is refused after
it (:meth:`ProducerStateManager.verified`) instead of opening a transaction nobody ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from samsa.protocol.batch import BatchHeader

from .errors import InvalidProducerEpoch, OutOfOrderSequence

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "AbortedTxn",
    "BatchMetadata",
    "ProducerEntry",
    "ProducerStateManager",
    "check_batch_sequence",
    "in_sequence",
    "next_entry",
]

NUM_BATCHES_TO_RETAIN = 5
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What a retried batch is recognised by, and what to answer for it."""

    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_timestamp: int

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def check_batch_sequence(entry: ProducerEntry | None, header: BatchHeader) -> BatchMetadata | None:
    """Validate one batch against its producer's entry.

    Returns the metadata of the original batch if ``header`` is a duplicate, None if it may
    be appended; raises :class:`InvalidProducerEpoch` or :class:`OutOfOrderSequence`.
    """
    if header.producer_id < 0 or header.is_control or entry is None:
        return None
    epoch, first_seq = header.producer_epoch, header.base_sequence
    if epoch < entry.epoch:
        raise InvalidProducerEpoch(
            f"producer {header.producer_id} epoch {epoch} is older than {entry.epoch}"
        )
    if first_seq == NO_SEQUENCE:  # a coordinator's transactional write: no sequence
        return None
    if epoch > entry.epoch:
        if first_seq != 0:
            raise OutOfOrderSequence(
                f"producer {header.producer_id} new epoch {epoch} starts at sequence "
                f"{first_seq}, expected 0"
            )
        return None
    last_seq = header.last_sequence
    for batch in entry.batches:
        if batch.first_seq == first_seq and batch.last_seq == last_seq:
            return batch
    if not in_sequence(entry.last_seq, first_seq):
        raise OutOfOrderSequence(
            f"producer {header.producer_id} sequence {first_seq} does not follow "
            f"{entry.last_seq} (epoch {epoch})"
        )
    return None


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction of one partition: its producer, first offset, and the offset
    of its abort marker (Fetch's ``aborted_transactions`` lists the first two)."""

    producer_id: int
    first_offset: int
    last_offset: int


def next_entry(entry: ProducerEntry | None, header: BatchHeader) -> ProducerEntry | None:
    """The entry after appending ``header`` (already carrying its final offsets)."""
    if header.producer_id < 0:
        return entry
    if header.is_control:  # a marker at a newer epoch moves the producer to it
        if entry is not None and header.producer_epoch > entry.epoch:
            return ProducerEntry(header.producer_id, header.producer_epoch, (),
                                 header.max_timestamp)
        return entry
    if header.base_sequence == NO_SEQUENCE:  # a coordinator's write: the epoch only
        kept = entry.batches if entry is not None and entry.epoch == header.producer_epoch \
            else ()
        return ProducerEntry(header.producer_id, header.producer_epoch, kept,
                             header.max_timestamp)
    meta = BatchMetadata(
        header.base_sequence,
        header.last_sequence,
        header.base_offset,
        header.last_offset,
        header.max_timestamp,
    )
    if entry is None or entry.epoch != header.producer_epoch:
        batches: tuple[BatchMetadata, ...] = (meta,)
    else:
        batches = (*entry.batches, meta)[-NUM_BATCHES_TO_RETAIN:]
    return ProducerEntry(header.producer_id, header.producer_epoch, batches, header.max_timestamp)


class ProducerStateManager:
    """Producer id -> entry for one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        #: producer id -> first offset of its open transaction
        self.ongoing: dict[int, int] = {}
        #: aborted transactions, in marker order
        self.aborted: list[AbortedTxn] = []
        #: producer id -> the verification guards taken for its next transaction
        self.verifying: dict[int, set[object]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.entries.get(producer_id)

    def check(
        self, headers: Iterable[BatchHeader]
    ) -> tuple[BatchMetadata | None, dict[int, ProducerEntry]]:
        """Check batches of one append in order.

        Returns (duplicate metadata or None, staged entries to :meth:`commit` after the
        write). Raises on the first invalid batch; nothing is changed until commit.
        """
        staged: dict[int, ProducerEntry] = {}
        for header in headers:
            if header.producer_id < 0:
                continue
            pid = header.producer_id
            entry = staged.get(pid) or self.entries.get(pid)
            if header.is_control:  # a marker may move the producer to a newer epoch
                moved = next_entry(entry, header)
                if moved is not None and moved is not entry:
                    staged[pid] = moved
                continue
            duplicate = check_batch_sequence(entry, header)
            if duplicate is not None:
                return duplicate, {}
            new = next_entry(entry, header)
            assert new is not None
            staged[pid] = new
        return None, staged

    def commit(self, staged: dict[int, ProducerEntry]) -> None:
        self.entries.update(staged)

    def replay(self, header: BatchHeader, control: int | None = None) -> None:
        """Update from a batch found in the log (rebuilding state on open); no checks.
        ``control`` is a marker's type (:func:`samsa.protocol.batch.control_type`)."""
        new = next_entry(self.entries.get(header.producer_id), header)
        if new is not None:
            self.entries[header.producer_id] = new
        self.track(header, control)

    def track(self, header: BatchHeader, control: int | None) -> None:
        """Open or close a transaction for an appended batch (``control``: the type of a
        marker, 0 abort, 1 commit)."""
        pid = header.producer_id
        if pid < 0 or not header.is_transactional:
            return
        self.verifying.pop(pid, None)
        if header.is_control:
            first = self.ongoing.pop(pid, None)
            if control == 0 and first is not None:
                self.aborted.append(AbortedTxn(pid, first, header.base_offset))
        elif pid not in self.ongoing:
            self.ongoing[pid] = header.base_offset

    def in_transaction(self, producer_id: int, epoch: int) -> bool:
        """Whether ``producer_id`` has an open transaction here, at ``epoch``."""
        entry = self.entries.get(producer_id)
        return producer_id in self.ongoing and entry is not None and entry.epoch == epoch

    def start_verification(self, producer_id: int) -> object:
        """A guard for a verification of ``producer_id``'s next transaction."""
        guard = object()
        self.verifying.setdefault(producer_id, set()).add(guard)
        return guard

    def verified(self, producer_id: int, epoch: int, guard: object) -> bool:
        """Whether a batch verified under ``guard`` may still be appended: its
        transaction is open here already, or no marker came since the guard was taken."""
        return (self.in_transaction(producer_id, epoch)
                or guard in self.verifying.get(producer_id, ()))

    def end_verification(self, producer_id: int, guard: object) -> None:
        """Drop ``guard`` (its batch was appended, or refused)."""
        guards = self.verifying.get(producer_id)
        if guards is not None:
            guards.discard(guard)
            if not guards:
                del self.verifying[producer_id]

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first offset of the oldest open transaction, or ``high_watermark``."""
        return min(min(self.ongoing.values(), default=high_watermark), high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start, end)."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    def remove_before(self, log_start_offset: int) -> None:
        """Forget producers whose last batch is entirely below the log start offset."""
        self.entries = {
            pid: e for pid, e in self.entries.items() if e.last_offset >= log_start_offset
        }
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start_offset]

    def expire(self, now_ms: int, max_idle_ms: int) -> None:
        """Forget producers idle longer than ``max_idle_ms`` (producer.id.expiration.ms)."""
        self.entries = {
            pid: e for pid, e in self.entries.items() if now_ms - e.last_timestamp <= max_idle_ms
        }

    def clear(self) -> None:
        self.verifying.clear()
        self.entries.clear()
        self.ongoing.clear()
        self.aborted.clear()
