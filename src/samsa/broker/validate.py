"""Record-level checks of a produced batch, as Kafka's LogValidator makes them.

The broker keeps batches opaque (their header and CRC are checked by
:func:`samsa.protocol.batch.split_batches`); records are read only when the topic's configs
need them, as in Kafka: keys on compacted topics, timestamps when
``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` are set on a
CreateTime topic. Compressed batches are decompressed for it. Per-record failures give
Kafka's per-record errors (Produce v8+ ``record_errors``); the batch is then refused whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa.log.config import LONG_MAX, LogConfig
from samsa.protocol.batch import BATCH_OVERHEAD, CORRUPT_MESSAGE, INVALID_RECORD, BatchHeader
from samsa.protocol.records import CorruptRecordError, decompress, read_varint

INVALID_TIMESTAMP = ErrorCode.invalid_timestamp
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a batch is refused: a Kafka error code, the partition's error message and,
    for per-record failures, ``(batch index, message)`` of each failing record."""

    error_code: ErrorCode
    message: str
    record_errors: list[tuple[int, str]] = field(default_factory=list)


def needs_records(config: LogConfig) -> bool:
    """Whether produced batches must be read record by record for this config."""
    return config.compact or (not config.log_append_time and (
        config.message_timestamp_before_max_ms < LONG_MAX
        or config.message_timestamp_after_max_ms < LONG_MAX))


def check(buf: bytes | memoryview, header: BatchHeader, config: LogConfig, now_ms: int,
          partition: str) -> Rejection | None:
    """Kafka's record checks of the produced batch ``header`` in ``buf`` (already
    split and CRC-checked); ``partition`` ("topic-N") goes into messages."""
    if header.size > config.max_message_bytes:
        return None  # refused by the log with MESSAGE_TOO_LARGE before any record check
    if header.timestamp_type == 1 and config.log_append_time:
        return _records_rejected(INVALID_TIMESTAMP, [
            (i, f"Invalid timestamp type in message with offset {header.base_offset + i}. "
                "Producer should not set timestamp type to LogAppendTime.")
            for i in range(header.record_count)])
    if not needs_records(config):
        return None
    body = memoryview(buf)[header.position + BATCH_OVERHEAD : header.end]
    if header.compression:
        try:
            data: bytes | memoryview = decompress(header.compression, bytes(body))
        except CorruptRecordError as exc:
            return Rejection(CORRUPT_MESSAGE, f"{exc} in topic partition {partition}")
    else:
        data = body
    try:
        errors = _scan(data, header, config, now_ms, partition)
    except _Malformed as exc:
        return Rejection(exc.code, f"{exc.message} in topic partition {partition}")
    except (IndexError, CorruptRecordError):
        return Rejection(INVALID_RECORD, f"Found invalid record structure in topic partition "
                                         f"{partition}")
    if not errors:
        return None
    if any(code == INVALID_TIMESTAMP for code, _, _ in errors):
        return _records_rejected(INVALID_TIMESTAMP, [(i, m) for _, i, m in errors])
    return _records_rejected(INVALID_RECORD, [(i, m) for _, i, m in errors])


class _Malformed(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _scan(data: bytes | memoryview, header: BatchHeader, config: LogConfig, now: int,
          partition: str) -> list[tuple[ErrorCode, int, str]]:
    """Walk the records (skipping values and headers by their length); returns
    ``(error code, batch index, message)`` for each record Kafka would refuse."""
    want_key = config.compact
    check_ts = not config.log_append_time and (
        config.message_timestamp_before_max_ms < LONG_MAX
        or config.message_timestamp_after_max_ms < LONG_MAX)
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    base_ts, base_offset = header.base_timestamp, header.base_offset
    errors: list[tuple[ErrorCode, int, str]] = []
    varint = read_varint
    end = len(data)
    pos = 0
    for i in range(header.record_count):
        if pos >= end:
            raise _Malformed(INVALID_RECORD, "Incorrect declared batch size, premature EOF reached")
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = varint(data, pos)  # type: ignore[arg-type]
        if length < 0 or pos + length > end:
            raise _Malformed(INVALID_RECORD, f"Invalid record size: expected {length} bytes in "
                             f"record payload, but the batch has only {end - pos} left")
        next_record = pos + length
        pos += 1  # attributes
        b = data[pos]
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            ts_delta, pos = varint(data, pos)  # type: ignore[arg-type]
        b = data[pos]
        if b < 0x80:
            offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            offset_delta, pos = varint(data, pos)  # type: ignore[arg-type]
        if offset_delta != i:
            raise _Malformed(CORRUPT_MESSAGE, f"Record {i} of the batch has offset delta "
                             f"{offset_delta}; inner offsets must run 0..{header.record_count - 1}")
        if want_key and data[pos] == 1:  # zigzag -1: a null key
            errors.append((INVALID_RECORD, i, "Compacted topic cannot accept message "
                           f"without key in topic partition {partition}"))
            pos = next_record
            continue
        if check_ts:
            ts = base_ts + ts_delta
            if ts != NO_TIMESTAMP and (now - ts > before or ts - now > after):
                errors.append((INVALID_TIMESTAMP, i, f"Timestamp {ts} of message with offset "
                               f"{base_offset + offset_delta} is out of range. The timestamp "
                               f"should be within [{now - before}, {now + after}]"))
        if pos > next_record:
            raise _Malformed(INVALID_RECORD, "Found invalid record structure")
        pos = next_record
    if pos != end:
        raise _Malformed(INVALID_RECORD,
                         "Incorrect declared batch size, records still remaining in file")
    return errors


def _records_rejected(code: ErrorCode, errors: list[tuple[int, str]]) -> Rejection:
    """Kafka's RecordValidationException: the partition's message sums the records'."""
    if code == INVALID_TIMESTAMP:
        message = "One or more records have been rejected due to invalid timestamp"
    else:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        message = (f"One or more records have been rejected due to {len(errors)} record errors "
                   "in total, and only showing the first three errors at most: "
                   f"[{shown}]")
    return Rejection(code, message, errors)
