"""Minimal reading of the records inside a v2 batch, for compaction and timestamp lookup.

The broker never re-encodes records; compaction only needs each record's offset delta,
timestamp delta, key and whether the value is null, plus the byte span of the record so a
thinned batch can reuse the original bytes verbatim. kio's reader is not used because it
truncates timestamps to whole seconds. Compressed record sections are decompressed by
:func:`samsa.protocol.records.decompress` (gzip, snappy raw or xerial-framed, lz4, zstd).
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.protocol.batch import BATCH_OVERHEAD, BatchHeader
from samsa.protocol.records import CorruptRecordError
from samsa.protocol.records import decompress as _decompress

__all__ = ["RawRecord", "decompress", "read_records", "record_at_or_after"]



class RecordDecodeError(ValueError):
    """The records section of a batch cannot be decoded."""


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record: deltas relative to the batch, key, value nullness and its byte span."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value_is_null: bool
    start: int
    end: int


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint/varlong at ``pos`` -> (value, next position)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise RecordDecodeError("varint runs past the end")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint too long")


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress a records section (the client's codec); RecordDecodeError on bad data."""
    try:
        return _decompress(codec, data)
    except CorruptRecordError as exc:
        raise RecordDecodeError(str(exc)) from exc


def read_records(batch: bytes, header: BatchHeader) -> tuple[bytes, list[RawRecord]]:
    """Decode the records of ``batch`` (one whole batch starting at index 0).

    Returns the (decompressed) records section and the records; spans index that section.
    """
    section = decompress(header.compression, batch[BATCH_OVERHEAD : header.size])
    records: list[RawRecord] = []
    pos = 0
    for _ in range(header.record_count):
        length, body = _varint(section, pos)
        end = body + length
        if length < 0 or end > len(section):
            raise RecordDecodeError("record length past the end of the batch")
        cur = body + 1  # attributes int8
        ts_delta, cur = _varint(section, cur)
        off_delta, cur = _varint(section, cur)
        key_len, cur = _varint(section, cur)
        key: bytes | None = None
        if key_len >= 0:
            key = section[cur : cur + key_len]
            cur += key_len
        value_len, cur = _varint(section, cur)
        if cur > end or (value_len > 0 and cur + value_len > end):
            raise RecordDecodeError("record fields past the record length")
        records.append(RawRecord(off_delta, ts_delta, key, value_len < 0, pos, end))
        pos = end
    return section, records


def record_at_or_after(batch: bytes, header: BatchHeader, ts_ms: int,
                       floor: int) -> tuple[int, int]:
    """(offset, timestamp) of the first record of ``batch`` (whose max timestamp is at least
    ``ts_ms``) with a timestamp >= ``ts_ms`` and an offset >= ``floor`` (the log start).
    For LogAppendTime every record has the batch's max timestamp; if the records do not
    decode, the batch answers (Kafka's batch-level answer): its base offset (at least
    ``floor``) and max timestamp."""
    fallback = (max(header.base_offset, floor), header.max_timestamp)
    if header.timestamp_type == 1:
        return fallback
    try:
        _, records = read_records(batch, header)
    except RecordDecodeError:
        return fallback
    for record in records:
        ts = header.base_timestamp + record.timestamp_delta
        offset = header.base_offset + record.offset_delta
        if ts >= ts_ms and offset >= floor:
            return offset, ts
    return fallback
