"""Decoding of a fetched record set straight into one Arrow record batch.

Python walks the batch headers (CRC checks, decompression, control batches); the records
are decoded by the C extension ``samsa.spark._columnar`` (built with samsa when a C
compiler is there), which writes offsets, timestamps, keys and values straight into Arrow
buffers. Without it numpy does the same: Python walks each batch's record lengths (one
varint per record; runs of records of one size are checked at once with numpy instead),
every other field is decoded for all records of a fetch response at once, and keys and
values are gathered into Arrow binary buffers without per-record Python objects. Headers
(only with ``includeHeaders``) are parsed per record. The row-by-row decoder in
:mod:`samsa.spark.arrow` is the reference (the tests compare both paths with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from samsa.protocol.records import CorruptRecordError, decompress, read_varint
from samsa.spark.arrow import BATCH_HEADER_SIZE, HEADERS_TYPE, arrow_schema, whole_batches

__all__ = ["NATIVE", "decode_chunk"]

try:
    from samsa.spark import _columnar as _native
except ImportError:  # not built (no C compiler when samsa was installed): numpy below
    _native = None  # type: ignore[assignment]

NATIVE = _native is not None
"""Whether the C extension (``samsa.spark._columnar``) decodes records."""

_TS = pa.timestamp("us", tz="UTC")
_I64 = np.int64


def _walk(body: bytes | memoryview, count: int, base: int, out: list[int],
          pos: int = 0) -> None:
    """Append the start of each record's fields (after its length) to ``out``: ``count``
    records from ``pos``, which must end the body."""
    append = out.append
    for _ in range(count):
        b = body[pos]
        if b < 0x80:
            append(base + pos + 1)
            pos += 1 + (b >> 1)
            continue
        b2 = body[pos + 1]
        if b2 < 0x80:
            append(base + pos + 2)
            pos += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
            continue
        value, shift, p = b & 0x7F, 7, pos + 1
        while True:
            b = body[p]
            p += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 35:
                raise CorruptRecordError("record length varint too long")
        append(base + p)
        pos = p + (value >> 1)
    if pos != len(body):
        raise CorruptRecordError("record lengths do not add up to the batch size")


_MAX_RUNS = 6
_MIN_RUN = 32


def _starts(body: bytes | memoryview, count: int, base: int) -> np.ndarray[Any, Any]:
    """Start of each record's fields (after its length varint), offset by ``base``.

    Machine-written batches hold runs of records of one size (fixed-size values; the offset
    and timestamp deltas change their varint size only a few times per batch). From a
    record of ``stride`` bytes, numpy checks every ``stride``-th position for the same length
    varint bytes: the records there all have that length, so walking would find exactly
    those positions. After a few runs, or a short one, the rest is walked record by record.
    """
    n = len(body)
    u = np.frombuffer(body, np.uint8)
    parts: list[np.ndarray[Any, Any]] = []
    pos = k = 0
    for _ in range(_MAX_RUNS):
        if k == count:
            break
        raw, size = 0, 0
        while size < 5 and pos + size < n:
            b = body[pos + size]
            raw |= (b & 0x7F) << (7 * size)
            size += 1
            if b < 0x80:
                break
        else:
            break  # truncated or overlong: the walk reports it
        stride = size + (raw >> 1)
        fits = min(count - k, (n - pos) // stride) if stride > size and not raw & 1 else 0
        if fits < _MIN_RUN:
            break
        at = pos + stride * np.arange(fits, dtype=_I64)
        same = (u[at[:, None] + np.arange(size)] == u[pos : pos + size]).all(axis=1)
        run = int(np.argmin(same)) if not same.all() else fits
        parts.append(at[:run] + (base + size))
        pos += run * stride
        k += run
        if run < _MIN_RUN:
            break
    if k < count or pos != n:
        rest: list[int] = []
        _walk(body, count - k, base, rest, pos)
        parts.append(np.array(rest, _I64))
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _varints(u: np.ndarray[Any, Any], p: np.ndarray[Any, Any]
             ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Zigzag varints at positions ``p`` of ``u``: (values, positions after them)."""
    b = u[p].astype(_I64)
    value = b & 0x7F
    size = np.ones(len(p), _I64)
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while len(more):
        if shift > 63:
            raise CorruptRecordError("varint too long")
        bb = u[p[more] + size[more]].astype(_I64)
        value[more] |= (bb & 0x7F) << shift
        size[more] += 1
        more = more[bb >= 0x80]
        shift += 7
    return (value >> 1) ^ -(value & 1), p + size


def _binary(u: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
            lengths: np.ndarray[Any, Any]) -> pa.Array:
    """A binary array of ``u[start:start+length]`` (length -1: null)."""
    n = len(lengths)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, _I64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1]:
        # Ranges are disjoint and in buffer order: a mask of alternating runs (gap, range,
        # gap, ...) selects exactly their bytes, cheaper than an index gather.
        ends = starts + sizes
        runs = np.empty(2 * n + 1, _I64)
        runs[0] = starts[0]
        runs[1:-1:2] = sizes
        runs[2:-1:2] = starts[1:] - ends[:-1]
        runs[-1] = len(u) - ends[-1]
        pattern = np.zeros(2 * n + 1, np.bool_)
        pattern[1::2] = True
        data = u[np.repeat(pattern, runs)]
    else:
        data = np.zeros(0, np.uint8)
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(
        offsets.astype(np.int32)), pa.py_buffer(data)], nulls)


def _headers(buf: bytes, positions: np.ndarray[Any, Any], counts: np.ndarray[Any, Any]
             ) -> pa.Array:
    """``array<struct<key, value>>`` parsed per record (``positions`` after the count)."""
    rows: list[list[dict[str, Any]]] = []
    for pos, count in zip(positions.tolist(), counts.tolist(), strict=True):
        row = []
        for _ in range(count):
            n, pos = read_varint(buf, pos)
            key = buf[pos : pos + n].decode()
            pos += n
            n, pos = read_varint(buf, pos)
            value = None if n < 0 else buf[pos : pos + n]
            pos += max(n, 0)
            row.append({"key": key, "value": value})
        rows.append(row)
    return pa.array(rows, HEADERS_TYPE)


def _bodies(mv: memoryview, start: int, until: int
            ) -> tuple[bytes | memoryview, list[tuple[int, ...]], int | None]:
    """The buffer holding the bodies of the batches with rows in ``[start, until)``, a row
    per batch (body position, body length, record count, base offset, base timestamp,
    LogAppendTime or -1, timestamp type), and the offset after the last whole batch.

    Uncompressed batches are decoded in place; otherwise the bodies are decompressed and
    concatenated. Control batches are skipped; CRCs are checked.
    """
    nxt = None
    wanted = []
    for b in whole_batches(mv):
        nxt = b.next_offset
        if not b.attributes & 0x20 and nxt > start and b.base < until and b.record_count > 0:
            wanted.append(b)
    if not any(b.attributes & 0x07 for b in wanted):
        return mv, [(b.pos + BATCH_HEADER_SIZE, b.size - BATCH_HEADER_SIZE, b.record_count,
                     b.base, b.base_ts, b.max_ts if b.attributes & 0x08 else -1,
                     1 if b.attributes & 0x08 else 0) for b in wanted], nxt
    bodies: list[bytes | memoryview] = []
    meta: list[tuple[int, ...]] = []
    offset = 0
    for b in wanted:
        body: bytes | memoryview = mv[b.pos + BATCH_HEADER_SIZE : b.pos + b.size]
        if b.attributes & 0x07:
            body = decompress(b.attributes & 0x07, bytes(body))
        bodies.append(body)
        meta.append((offset, len(body), b.record_count, b.base, b.base_ts,
                     b.max_ts if b.attributes & 0x08 else -1, 1 if b.attributes & 0x08 else 0))
        offset += len(body)
    return b"".join(bodies), meta, nxt


def _fields_numpy(buf: bytes | memoryview, meta: list[tuple[int, ...]], start: int,
                  until: int, include_headers: bool) -> tuple[Any, ...]:
    """What ``_columnar.decode`` returns, with numpy (keys and values as Arrow arrays)."""
    starts = []
    for pos, size, count, base, *_ in meta:
        try:
            starts.append(_starts(buf[pos : pos + size], count, pos))
        except IndexError as exc:
            raise CorruptRecordError(f"bad record in batch at offset {base}") from exc
    u = np.frombuffer(buf, np.uint8)
    m = np.array(meta, _I64)
    counts = m[:, 2]
    try:
        p = np.concatenate(starts) + 1  # skip the record attributes
        ts_delta, p = _varints(u, p)
        off_delta, p = _varints(u, p)
        key_len, p = _varints(u, p)
        key_at = p
        p = p + np.maximum(key_len, 0)
        value_len, p = _varints(u, p)
        value_at = p
        p = p + np.maximum(value_len, 0)
        header_count, p = _varints(u, p)
    except IndexError as exc:
        raise CorruptRecordError("record runs past the end of its batch") from exc
    offsets = np.repeat(m[:, 3], counts) + off_delta
    fixed = np.repeat(m[:, 5], counts)
    timestamps = np.where(fixed >= 0, fixed, np.repeat(m[:, 4], counts) + ts_delta)
    ts_types = np.repeat(m[:, 6], counts).astype(np.int32)
    keep = (offsets >= start) & (offsets < until)
    if not keep.all():
        sel = np.flatnonzero(keep)
        offsets, timestamps, ts_types = offsets[sel], timestamps[sel], ts_types[sel]
        key_at, key_len, value_at, value_len = key_at[sel], key_len[sel], value_at[sel], \
            value_len[sel]
        p, header_count = p[sel], header_count[sel]
    return (len(offsets), offsets, timestamps * 1000, ts_types, _binary(u, key_at, key_len),
            _binary(u, value_at, value_len), p, header_count)


def _fields_native(buf: bytes | memoryview, meta: list[tuple[int, ...]], start: int,
                   until: int, include_headers: bool) -> tuple[Any, ...]:
    """``_columnar.decode``'s buffers as numpy and Arrow arrays (no copies)."""
    assert _native is not None
    try:
        (n, offsets, stamps, types, koff, kdata, kvalid, voff, vdata, vvalid, hpos,
         hcount) = _native.decode(buf, np.array(meta, _I64).tobytes(), start, until,
                                  include_headers)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from exc

    def binary(off: bytes, data: bytes, valid: bytes | None) -> pa.Array:
        nulls = 0 if valid is None else n - _popcount(valid, n)
        return pa.Array.from_buffers(pa.binary(), n, [
            None if valid is None else pa.py_buffer(valid), pa.py_buffer(off),
            pa.py_buffer(data)], nulls)

    return (n, np.frombuffer(offsets, _I64), np.frombuffer(stamps, _I64),
            np.frombuffer(types, np.int32), binary(koff, kdata, kvalid),
            binary(voff, vdata, vvalid),
            None if hpos is None else np.frombuffer(hpos, _I64),
            None if hcount is None else np.frombuffer(hcount, np.int32))


def _popcount(bitmap: bytes, n: int) -> int:
    return int(np.unpackbits(np.frombuffer(bitmap, np.uint8), count=n,
                             bitorder="little").sum())


def decode_chunk(data: bytes | memoryview, start: int, until: int, topic: str,
                 partition: int, include_headers: bool, *, native: bool = True
                 ) -> tuple[pa.RecordBatch | None, int | None]:
    """Rows of ``data`` with ``start <= offset < until`` and the offset after its last batch.

    Control batches are skipped; CRCs are checked; the batch is ``None`` when no row falls
    in the range. ``native``: decode records with the C extension when it is built
    (otherwise, or with ``False``, with numpy).
    """
    buf, meta, nxt = _bodies(memoryview(data), start, until)
    if not meta:
        return None, nxt
    fields = _fields_native if native and _native is not None else _fields_numpy
    n, offsets, timestamps, ts_types, keys, values, hpos, hcount = fields(
        buf, meta, start, until, include_headers)
    if n == 0:
        return None, nxt
    arrays = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.int64()).view(_TS),
        pa.array(ts_types, pa.int32()),
    ]
    if include_headers:
        if hcount.any():
            # ``hpos`` is just past each record's header count: its first header.
            arrays.append(_headers(bytes(buf), hpos, hcount))
        else:
            arrays.append(pa.ListArray.from_arrays(
                pa.array(np.zeros(n + 1, np.int32)),
                pa.array([], HEADERS_TYPE.value_type)).cast(HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers)), nxt
