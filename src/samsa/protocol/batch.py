"""Kafka v2 record batch (magic 2) header access, without decoding records.

Layout (big-endian), offsets from the start of the batch::

    baseOffset int64 @0        batchLength int32 @8 (bytes after this field)
    partitionLeaderEpoch int32 @12   magic int8 @16   crc uint32 @17 (CRC-32C of @21..end)
    attributes int16 @21       lastOffsetDelta int32 @23   baseTimestamp int64 @27
    maxTimestamp int64 @35     producerId int64 @43        producerEpoch int16 @51
    baseSequence int32 @53     recordCount int32 @57       records @61

The broker keeps batches opaque: it validates them (:func:`split_batches`), patches the base
offset (outside the CRC) and, for LogAppendTime, the attributes and max timestamp (then the
CRC is recomputed), exactly as Kafka does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c
from kio.schema.errors import ErrorCode

__all__ = [
    "BATCH_OVERHEAD",
    "CORRUPT_MESSAGE",
    "INVALID_RECORD",
    "LOG_OVERHEAD",
    "BatchHeader",
    "InvalidRecords",
    "TruncatedBatch",
    "batch_crc",
    "check_batch",
    "header_from_bytes",
    "last_sequence",
    "parse_header",
    "patch_base_offset",
    "patch_log_append_time",
    "set_crc",
    "split_batches",
]

BATCH_OVERHEAD = 61
"""Size of a v2 batch with no records."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes not counted by batchLength."""
MAGIC = 2
CRC_START = 21
"""The CRC covers the batch from the attributes field to its end."""

CORRUPT_MESSAGE = ErrorCode.corrupt_message
INVALID_RECORD = ErrorCode.invalid_record

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
assert _HEADER.size == BATCH_OVERHEAD

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


class InvalidRecords(Exception):
    """A record blob that a Kafka broker would reject; ``error_code`` is the Kafka error."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class TruncatedBatch(InvalidRecords):
    """The buffer ends before the batch (header or body) does."""

    def __init__(self, message: str) -> None:
        super().__init__(CORRUPT_MESSAGE, message)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of one v2 batch, plus where it starts in its buffer or file."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        """Position just after the batch."""
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_producer(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)


def last_sequence(base_sequence: int, delta: int) -> int:
    """Sequence of the last record; sequences wrap from int32 max to 0 as in Kafka."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_sequence + delta) % (INT32_MAX + 1)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; :class:`TruncatedBatch` if fewer than 61 bytes remain.

    Only the header is checked for length; see :func:`check_batch` for full validation.
    """
    if pos < 0 or len(buf) - pos < BATCH_OVERHEAD:
        raise TruncatedBatch(f"batch header at {pos} needs {BATCH_OVERHEAD} bytes")
    return BatchHeader(pos, *_HEADER.unpack_from(buf, pos))


def header_from_bytes(data: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """Parse a header read separately (e.g. by pread) that starts at file ``position``."""
    if len(data) < BATCH_OVERHEAD:
        raise TruncatedBatch(f"batch header at {position} needs {BATCH_OVERHEAD} bytes")
    return BatchHeader(position, *_HEADER.unpack_from(data, 0))


def batch_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """CRC-32C of the batch as stored in ``buf`` (attributes to end)."""
    return int(crc32c(memoryview(buf)[header.position + CRC_START : header.end]))


def check_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, strict: bool = True
) -> BatchHeader:
    """Parse and validate one whole batch at ``pos``.

    Raises :class:`InvalidRecords` with Kafka's error code: magic other than 2 gives
    INVALID_RECORD (Kafka rejects non-v2 batches in Produce v3+ with InvalidRecordException);
    a bad length, truncation or CRC mismatch gives CORRUPT_MESSAGE. With ``strict`` (produced
    batches), the record count must be positive and equal to ``lastOffsetDelta + 1`` as
    Kafka's LogValidator requires (INVALID_RECORD); without it (batches read back from the
    log, which compaction may have thinned) only ``0 <= count <= lastOffsetDelta + 1``.
    """
    header = parse_header(buf, pos)
    if header.magic != MAGIC:
        raise InvalidRecords(INVALID_RECORD, f"unsupported record batch magic {header.magic}")
    if header.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD:
        raise InvalidRecords(CORRUPT_MESSAGE, f"batch length {header.batch_length} too small")
    if header.end > len(buf):
        raise TruncatedBatch(f"batch at {pos} of {header.size} bytes is truncated")
    if batch_crc(buf, header) != header.crc:
        raise InvalidRecords(CORRUPT_MESSAGE, f"CRC mismatch in batch at {pos}")
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise InvalidRecords(INVALID_RECORD, "negative record count or offset delta")
    if strict:
        if header.record_count == 0 or header.record_count != header.last_offset_delta + 1:
            raise InvalidRecords(
                INVALID_RECORD,
                f"record count {header.record_count} inconsistent with "
                f"lastOffsetDelta {header.last_offset_delta}",
            )
    elif header.record_count > header.last_offset_delta + 1:
        raise InvalidRecords(INVALID_RECORD, "more records than offsets in batch")
    return header


def split_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Validate that ``buf`` is a whole number (at least one) of v2 batches; return headers.

    Any malformed input raises :class:`InvalidRecords`, never another exception.
    """
    if len(buf) == 0:
        raise InvalidRecords(INVALID_RECORD, "no record batch")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < len(buf):
        header = check_batch(buf, pos, strict=True)
        headers.append(header)
        pos = header.end
    return headers


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Overwrite baseOffset of the batch at ``pos`` (outside the CRC: nothing to recompute)."""
    _INT64.pack_into(buf, pos, base_offset)


def patch_log_append_time(buf: bytearray | memoryview, pos: int, ts_ms: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime at ``ts_ms`` and recompute its CRC.

    As Kafka does, this sets the timestampType attribute bit and maxTimestamp; the
    baseTimestamp and per-record deltas stay as the producer wrote them (consumers use
    maxTimestamp for every record of a LogAppendTime batch).
    """
    header = parse_header(buf, pos)
    _INT16.pack_into(buf, pos + 21, header.attributes | _TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + 35, ts_ms)
    crc = int(crc32c(memoryview(buf)[pos + CRC_START : header.end]))
    _UINT32.pack_into(buf, pos + 17, crc)


def set_crc(buf: bytearray | memoryview, pos: int) -> None:
    """Recompute and store the CRC of the (already length-correct) batch at ``pos``."""
    header = parse_header(buf, pos)
    _UINT32.pack_into(buf, pos + 17, batch_crc(buf, header))

