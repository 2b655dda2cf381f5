"""Key-based compaction of batches (cleanup.policy=compact).

A pass first maps every key of the cleanable segments to its latest offset (keys are kept
as 16-byte BLAKE2b digests to bound memory), then rewrites each batch:

* Uncompressed batches are thinned record by record. A kept record's bytes are reused
  verbatim; the batch keeps its baseOffset, lastOffsetDelta, timestamps and producer fields
  (so offsets are preserved and holes appear), only batchLength, recordCount and the CRC
  are rewritten. A batch left with no record is dropped.
* Compressed batches are kept or dropped whole: kept if any of their records survives.
  (Records are decompressed with cramjam only to read their keys.) Batches that cannot be
  decoded are kept unchanged.
* Control batches (transaction markers) are kept unchanged.
* A batch of an aborted transaction is dropped, and none of its keys shadows an older
  record (Kafka's cleaner likewise), so an aborted write never costs a committed one. Only
  what lies below the last stable offset is cleaned (the cleaner's plan stops there), so
  no open transaction's batch is judged.
* Records with a null key are kept.
* A tombstone (null value) that is the latest for its key survives until its timestamp
  (the batch max timestamp for LogAppendTime) is older than ``delete.retention.ms``.
  Kafka counts that delay from the first cleaning that saw the tombstone (KIP-534); using
  the record timestamp is simpler and deterministic.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from samsa.protocol.batch import BATCH_OVERHEAD, LOG_OVERHEAD, BatchHeader, set_crc

from .producer_state import AbortedTxn
from .records import RawRecord, RecordDecodeError, read_records

__all__ = ["AbortedRanges", "KeyMap", "aborted_ranges", "clean_batch", "key_digest"]

_INT32 = struct.Struct(">i")

KeyMap = dict[bytes, int]
"""Key digest -> latest offset of that key."""


def key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


AbortedRanges = Mapping[int, Sequence[tuple[int, int]]]
"""Producer id -> (first offset, marker offset) of each of its aborted transactions."""


def aborted_ranges(aborted: Iterable[AbortedTxn]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for a in aborted:
        out.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    return out


def is_aborted(header: BatchHeader, aborted: AbortedRanges) -> bool:
    """Whether ``header`` is a data batch of an aborted transaction."""
    if not header.is_transactional or header.is_control:
        return False
    return any(first <= header.base_offset <= last
               for first, last in aborted.get(header.producer_id, ()))


def add_to_key_map(key_map: KeyMap, header: BatchHeader, batch: bytes,
                   aborted: AbortedRanges | None = None) -> None:
    """Record the offsets of the keyed records of ``batch`` (later ones win); an aborted
    transaction's records count for nothing."""
    if header.is_control or (aborted and is_aborted(header, aborted)):
        return
    try:
        _, records = read_records(batch, header)
    except RecordDecodeError:
        return
    for record in records:
        if record.key is not None:
            key_map[key_digest(record.key)] = header.base_offset + record.offset_delta


@dataclass(frozen=True, slots=True)
class CleanPolicy:
    """What the cleaner needs to decide about one record."""

    key_map: KeyMap
    tombstone_horizon_ms: int
    """Tombstones with a timestamp below this are dropped."""
    aborted: AbortedRanges = field(default_factory=dict)
    """The aborted transactions: their batches are dropped."""


def _retain(record: RawRecord, header: BatchHeader, policy: CleanPolicy) -> bool:
    if record.key is None:
        return True
    offset = header.base_offset + record.offset_delta
    latest = policy.key_map.get(key_digest(record.key))
    if latest is not None and offset < latest:
        return False
    if record.value_is_null:
        ts = (
            header.max_timestamp
            if header.timestamp_type == 1
            else header.base_timestamp + record.timestamp_delta
        )
        return ts >= policy.tombstone_horizon_ms
    return True


def clean_batch(header: BatchHeader, batch: bytes, policy: CleanPolicy) -> bytes | None:
    """The batch to write in the cleaned segment (possibly ``batch`` itself), or None."""
    if header.is_control:
        return batch
    if is_aborted(header, policy.aborted):
        return None
    try:
        section, records = read_records(batch, header)
    except RecordDecodeError:
        return batch
    kept = [r for r in records if _retain(r, header, policy)]
    if len(kept) == len(records):
        return batch
    if not kept:
        return None
    if header.compression:
        return batch
    out = bytearray(batch[:BATCH_OVERHEAD])
    out += _join(section, kept)
    _INT32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _INT32.pack_into(out, 57, len(kept))
    set_crc(out, 0)
    return bytes(out)


def _join(section: bytes, records: Iterable[RawRecord]) -> bytes:
    view = memoryview(section)
    return b"".join(view[r.start : r.end] for r in records)
