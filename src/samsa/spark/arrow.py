"""Fetched record sets -> Arrow record batches in the schema of Spark's Kafka source.

The decoder walks v2 record batches (CRC checked, decompressed by ``samsa.protocol``) and
appends straight into column lists, skipping control batches and records outside the
requested ``[start, until)`` range, so the same range always gives the same rows.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa
from crc32c import crc32c

from samsa.protocol.batch import BATCH_OVERHEAD
from samsa.protocol.records import CorruptRecordError, decode_records, decompress

__all__ = [
    "BATCH_HEADER_SIZE",
    "HEADERS_TYPE",
    "Columns",
    "WholeBatch",
    "arrow_schema",
    "decode_into",
    "scan_next_offset",
    "spark_schema_ddl",
    "whole_batches",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
BATCH_HEADER_SIZE = _HEADER_SIZE = BATCH_OVERHEAD
_LOG_OVERHEAD = 12
_CRC_START = 21

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()),
                                                      ("value", pa.binary())])))

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]


def spark_schema_ddl(include_headers: bool) -> str:
    """The source's Spark schema (as Spark's Kafka source), in DDL."""
    ddl = ("key binary, value binary, topic string, partition int, offset long, "
           "timestamp timestamp, timestampType int")
    if include_headers:
        ddl += ", headers array<struct<key: string, value: binary>>"
    return ddl


def arrow_schema(include_headers: bool) -> pa.Schema:
    """Arrow schema Spark expects for :func:`spark_schema_ddl` (UTC microseconds)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


@dataclass
class Columns:
    """Column lists of one partition range, turned into Arrow batches by :meth:`take`."""

    topic: str
    partition: int
    include_headers: bool
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    ts_types: list[int] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def take(self) -> pa.RecordBatch:
        """Everything collected so far as one Arrow batch; the lists start over."""
        n = len(self.offsets)
        ts = pa.array(self.timestamps, pa.int64())
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.compute.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array([[{"key": k, "value": v} for k, v in h]
                                    for h in self.headers], HEADERS_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(self.include_headers))
        self.keys, self.values, self.offsets = [], [], []
        self.timestamps, self.ts_types, self.headers = [], [], []
        return batch


    def rows(self) -> list[tuple[Any, ...]]:
        """Everything collected so far as row tuples (the slower, non-Arrow path)."""
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        delta = datetime.timedelta
        topic, partition = self.topic, self.partition
        cols: list[Any] = [self.keys, self.values, self.offsets, self.timestamps, self.ts_types]
        if self.include_headers:
            cols.append(self.headers)
        out = [(k, v, topic, partition, o, epoch + delta(milliseconds=t),
                tt, *h) for k, v, o, t, tt, *h in zip(*cols, strict=True)]
        self.keys, self.values, self.offsets = [], [], []
        self.timestamps, self.ts_types, self.headers = [], [], []
        return out


def scan_next_offset(data: bytes | memoryview) -> int | None:
    """Offset after the last whole batch in ``data`` (header fields only), or None."""
    pos, end, last = 0, len(data), None
    while end - pos >= _HEADER_SIZE:
        base, length = _PREFIX.unpack_from(data, pos)
        size = length + _LOG_OVERHEAD
        if end - pos < size:
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        last = base + last_delta + 1
        pos += size
    return last


class WholeBatch(NamedTuple):
    """Header fields of one whole, CRC-checked batch and its position in the data."""

    pos: int
    size: int
    attributes: int
    record_count: int
    base: int
    base_ts: int
    max_ts: int
    next_offset: int


def whole_batches(data: bytes | memoryview) -> Iterator[WholeBatch]:
    """Every whole v2 batch of ``data`` (a trailing partial one is ignored); raises
    CorruptRecordError on a bad magic byte or CRC."""
    mv = memoryview(data)
    pos, end = 0, len(mv)
    while end - pos >= _HEADER_SIZE:
        base, length = _PREFIX.unpack_from(mv, pos)
        size = length + _LOG_OVERHEAD
        if end - pos < size:
            return
        (_, _, _, magic, crc, attributes, last_delta, base_ts, max_ts, _, _, _,
         count) = _HEADER.unpack_from(mv, pos)
        if magic != 2:
            raise CorruptRecordError(f"unsupported record batch magic {magic} at offset {base}")
        if crc32c(mv[pos + _CRC_START : pos + size]) != crc:
            raise CorruptRecordError(f"CRC mismatch in batch at offset {base}")
        yield WholeBatch(pos, size, attributes, count, base, base_ts, max_ts,
                         base + last_delta + 1)
        pos += size


def decode_into(cols: Columns, data: bytes, start: int, until: int) -> int | None:
    """Append records of ``data`` with ``start <= offset < until``; returns the next offset.

    The next offset is the one after the last whole batch (None when ``data`` holds no whole
    batch); control batches and compacted gaps advance it without producing rows.
    """
    nxt = None
    for b in whole_batches(data):
        nxt = b.next_offset
        if not b.attributes & 0x20 and nxt > start and b.base < until:  # not a control batch
            body = data[b.pos + _HEADER_SIZE : b.pos + b.size]
            codec = b.attributes & 0x07
            if codec:
                body = decompress(codec, body)
            ts_type = 1 if b.attributes & 0x08 else 0
            try:
                _records(cols, body, b.record_count, b.base, b.base_ts,
                         b.max_ts if ts_type else None, ts_type, start, until)
            except (IndexError, UnicodeDecodeError) as exc:
                raise CorruptRecordError(f"bad record in batch at offset {b.base}") from exc
    return nxt


def _records(cols: Columns, buf: bytes, count: int, base: int, base_ts: int,
             fixed_ts: int | None, ts_type: int, start: int, until: int) -> None:
    """Append the records of one batch with ``start <= offset < until`` to the columns."""
    keys, values, offsets, timestamps = cols.keys, cols.values, cols.offsets, cols.timestamps
    ts_types, headers, want_headers = cols.ts_types, cols.headers, cols.include_headers
    for offset, ts, key, value, hdrs in decode_records(buf, count, base, base_ts, fixed_ts):
        if start <= offset < until:
            keys.append(key)
            values.append(value)
            offsets.append(offset)
            timestamps.append(ts)
            ts_types.append(ts_type)
            if want_headers:
                headers.append(hdrs)
