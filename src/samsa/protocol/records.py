"""Client-side record codec: decode fetched v2 batches into records, encode produced batches.

Decoding checks each batch's CRC-32C, decompresses gzip, snappy (raw or xerial-framed, as
old Java clients wrote it), lz4 (frame) and zstd with cramjam, and reads every record with
its millisecond timestamp and headers (kio's record reader truncates timestamps to seconds,
so it is not used). Encoding writes one v2 batch, optionally compressed, with the producer
id, epoch and base sequence of an idempotent producer: :class:`BatchBuilder` encodes each
record as it is added (the producer's batches), :func:`encode_batch` a list of records.

``samsa.log.records`` decodes the same format for compaction (a subset of this module).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import cramjam
from crc32c import crc32c

from samsa.protocol.batch import BATCH_OVERHEAD, BatchHeader

__all__ = [
    "COMPRESSION_CODES",
    "BatchBuilder",
    "CorruptRecordError",
    "DecodedBatch",
    "ProducerRecordData",
    "RecordTuple",
    "compress",
    "decode_batches",
    "decompress",
    "encode_batch",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE = BATCH_OVERHEAD
_LOG_OVERHEAD = 12
_CRC_START = 21
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
"""``compression_type`` names to the codec id in the batch attributes."""


class CorruptRecordError(ValueError):
    """A fetched batch whose CRC, length or record encoding is invalid."""


class DecodedBatch(NamedTuple):
    """One decoded batch: header fields consumers need and its records.

    Each record is ``(offset, timestamp_ms, key, value, headers)``.
    """

    base_offset: int
    next_offset: int
    timestamp_type: int
    is_control: bool
    is_transactional: bool
    producer_id: int
    records: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
    producer_epoch: int = -1


class ProducerRecordData(NamedTuple):
    """A record to encode: timestamp (ms), key, value and headers."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]


def _xerial_decompress(data: bytes) -> bytes:
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("bad xerial snappy block size")
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        pos += size
    return bytes(out)


def decompress(codec: int, data: bytes) -> bytes:
    """Decompress a records section compressed with ``codec`` (1 gzip .. 4 zstd)."""
    try:
        if codec == 0:
            return data
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            if data[:8] == _XERIAL_MAGIC:
                return _xerial_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own error type
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a records section; snappy uses raw blocks (as librdkafka writes)."""
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The zigzag varint at ``pos``: (value, next position)."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")


def decode_records(
    buf: bytes, count: int, base_offset: int, base_ts: int, fixed_ts: int | None
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """Decode ``count`` records from ``buf`` (an uncompressed records section) as
    ``(offset, timestamp_ms, key, value, headers)``; ``fixed_ts`` is the batch's
    LogAppendTime, which replaces every record's timestamp."""
    out: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
    append = out.append
    varint = read_varint
    pos = 0
    for _ in range(count):
        # length
        b = buf[pos]
        if b < 0x80:
            pos += 1
        else:
            _, pos = varint(buf, pos)
        pos += 1  # attributes
        b = buf[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            ts_delta, pos = varint(buf, pos)
        b = buf[pos]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = varint(buf, pos)
        b = buf[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = varint(buf, pos)
        if n < 0:
            key = None
        else:
            key = buf[pos : pos + n]
            pos += n
        b = buf[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = varint(buf, pos)
        if n < 0:
            value = None
        else:
            value = buf[pos : pos + n]
            pos += n
        b = buf[pos]
        headers: list[tuple[str, bytes | None]] = []
        if b == 0:
            pos += 1
        else:
            nh, pos = varint(buf, pos)
            for _h in range(nh):
                n, pos = varint(buf, pos)
                hkey = buf[pos : pos + n].decode()
                pos += n
                n, pos = varint(buf, pos)
                if n < 0:
                    hval = None
                else:
                    hval = buf[pos : pos + n]
                    pos += n
                headers.append((hkey, hval))
        append((
            base_offset + off_delta,
            base_ts + ts_delta if fixed_ts is None else fixed_ts,
            key,
            value,
            headers,
        ))
    if pos > len(buf):
        raise CorruptRecordError("records run past the end of the batch")
    return out


def decode_batches(data: bytes, *, check_crc: bool = True) -> Iterator[DecodedBatch]:
    """Decode the whole v2 batches in ``data`` (a fetch response's record set).

    A truncated batch at the end (brokers may cut the last one at the fetch size limit) is
    ignored. Raises :class:`CorruptRecordError` on a CRC mismatch or undecodable records.
    """
    pos = 0
    end = len(data)
    while end - pos >= _LOG_OVERHEAD:
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        size = batch_length + _LOG_OVERHEAD
        if end - pos < size:
            return
        magic = data[pos + 16]
        if magic != 2:
            raise CorruptRecordError(f"unsupported record batch magic {magic}")
        if size < _HEADER_SIZE:
            raise CorruptRecordError(f"batch length {batch_length} too small")
        (_, _, _, _, crc, attributes, last_delta, base_ts, max_ts, producer_id, epoch, _,
         count) = _HEADER.unpack_from(data, pos)
        if check_crc and crc32c(memoryview(data)[pos + _CRC_START : pos + size]) != crc:
            raise CorruptRecordError(f"CRC mismatch in batch at offset {base_offset}")
        body = data[pos + _HEADER_SIZE : pos + size]
        codec = attributes & 0x07
        if codec:
            body = decompress(codec, body)
        ts_type = 1 if attributes & 0x08 else 0
        try:
            records = decode_records(
                body, count, base_offset, base_ts, max_ts if ts_type else None
            )
        except (IndexError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(f"bad record in batch at offset {base_offset}") from exc
        yield DecodedBatch(
            base_offset,
            base_offset + last_delta + 1,
            ts_type,
            bool(attributes & 0x20),
            bool(attributes & 0x10),
            producer_id,
            records,
            epoch,
        )
        pos += size


def _varint_bytes(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# Zigzag varints of -8192..8191 (the offset deltas, timestamp deltas and lengths of typical
# records) come from a table: encoding 100 B records is ~3x faster than building each varint.
_LIMIT = 1 << 13
_TABLE = [_varint_bytes(i) for i in range(-_LIMIT, _LIMIT)]
_NULL = _TABLE[_LIMIT - 1]


def _zz(value: int) -> bytes:
    if -_LIMIT <= value < _LIMIT:
        return _TABLE[value + _LIMIT]
    return _varint_bytes(value)


RecordTuple = tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
"""``(timestamp ms, key, value, headers)``: a :class:`ProducerRecordData` or a plain tuple."""


class _PyRecords:
    """The records of one batch, encoded as they are appended after a 61-byte placeholder
    for the header: the pure-Python reference of ``samsa._speedups.Records`` (its fallback
    when the C extension is not built; both write the same bytes)."""

    __slots__ = ("_buf", "_timestamps", "base_timestamp", "count", "max_timestamp")

    def __init__(self) -> None:
        self._buf = bytearray(_HEADER_SIZE)
        self._timestamps: list[int] = []
        self.count = 0
        self.base_timestamp = 0
        self.max_timestamp = 0

    def append(self, timestamp: int | None, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]] | None = ()) -> None:
        """Encode one record (CreateTime ``timestamp`` in ms, None: now) at the end of the
        batch."""
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        i = self.count
        delta = timestamp - self.base_timestamp if i else 0
        table, limit = _TABLE, _LIMIT
        if value is not None and not headers and i < limit and -limit <= delta < limit:
            # the usual records, in one join: attributes, deltas, key, value length
            n = len(value)
            if key is None:
                head = b"".join((b"\x00", table[delta + limit], table[i + limit], _NULL,
                                 table[n + limit])) if n < limit else b""
            elif len(key) < limit and n < limit:
                head = b"".join((b"\x00", table[delta + limit], table[i + limit],
                                 table[len(key) + limit], key, table[n + limit]))
            else:
                head = b""
            size = len(head) + n + 1
            if head and size < limit:
                buf = self._buf
                buf += table[size + limit]
                buf += head
                buf += value
                buf += b"\x00"
                self._appended(i, timestamp)
                return
        fields = [b"\x00", _zz(delta), _zz(i)]
        if key is None:
            fields.append(_NULL)
        else:
            fields += (_zz(len(key)), key)
        if value is None:
            fields.append(_NULL)
        else:
            fields += (_zz(len(value)), value)
        fields.append(_headers_bytes(headers) if headers else b"\x00")
        record = b"".join(fields)
        buf = self._buf
        buf += _zz(len(record))
        buf += record
        self._appended(i, timestamp)

    def _appended(self, i: int, timestamp: int) -> None:
        if i == 0:
            self.base_timestamp = self.max_timestamp = timestamp
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        self._timestamps.append(timestamp)
        self.count = i + 1

    def timestamp(self, index: int) -> int:
        """The timestamp of record ``index``."""
        if not 0 <= index < self.count:
            raise IndexError("no such record")
        return self._timestamps[index]


if TYPE_CHECKING:
    _Records = _PyRecords
else:
    try:
        from samsa._speedups import Records as _Records
    except ImportError:  # the C extension is optional: built by `pip install`, not required
        _Records = _PyRecords


class BatchBuilder(_Records):
    """One v2 batch being filled: each record is encoded as it is added (one pass over the
    record, no per-record object kept), and :meth:`build` writes the header once.

    The records section grows after a 61-byte placeholder, so an uncompressed batch gets
    its header and CRC in place. ``build`` is called once: it hands the buffer over.
    """

    __slots__ = ()

    def build(self, *, base_offset: int = 0, compression: int = 0, producer_id: int = -1,
              producer_epoch: int = -1, base_sequence: int = -1,
              transactional: bool = False, control: bool = False) -> bytes:
        """The batch: header, records (compressed with ``compression``), CRC-32C; a
        ``control`` batch carries transaction markers (:func:`encode_marker`)."""
        if not self.count:
            raise ValueError("a batch needs at least one record")
        buf = self._buf
        self._buf = bytearray()
        if compression:
            payload = compress(compression, memoryview(buf)[_HEADER_SIZE:])
            buf = bytearray(_HEADER_SIZE) + payload
        _HEADER.pack_into(
            buf, 0,
            base_offset,
            len(buf) - _LOG_OVERHEAD,
            -1,
            2,
            0,
            compression | (0x10 if transactional else 0) | (0x20 if control else 0),
            self.count - 1,
            self.base_timestamp,
            self.max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            self.count,
        )
        with memoryview(buf) as view:
            _UINT32.pack_into(buf, 17, crc32c(view[_CRC_START:]))
        return bytes(buf)


def _headers_bytes(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    fields = [_zz(len(headers))]
    for hk, hv in headers:
        hkb = hk.encode()
        fields += (_zz(len(hkb)), hkb)
        if hv is None:
            fields.append(_NULL)
        else:
            fields += (_zz(len(hv)), hv)
    return b"".join(fields)


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """Encode ``records`` as one v2 batch (CreateTime timestamps, CRC-32C set)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    builder = BatchBuilder()
    append = builder.append
    for ts, key, value, headers in records:
        append(ts, key, value, headers)
    return builder.build(base_offset=base_offset, compression=compression,
                         producer_id=producer_id, producer_epoch=producer_epoch,
                         base_sequence=base_sequence, transactional=transactional)


class LogEntry(NamedTuple):
    """A record of a coordinator's log as its loader reads it."""

    key: bytes | None
    value: bytes | None
    #: (producer id, epoch) of a transactional batch's record or marker, else None
    producer: tuple[int, int] | None
    #: a transaction marker's type (:data:`CONTROL_ABORT`, :data:`CONTROL_COMMIT`), else None
    marker: int | None


def log_entries(batches: Sequence[bytes | memoryview], start: int) -> Iterator[LogEntry]:
    """Every keyed record and every transaction marker of ``batches`` from offset ``start``,
    in order (a coordinator shard's log, as its loader reads it)."""
    for data in batches:
        for batch in decode_batches(bytes(data)):
            producer = (batch.producer_id, batch.producer_epoch) \
                if batch.is_transactional else None
            for offset, _, key, value, _ in batch.records:
                if offset < start or key is None:
                    continue
                if batch.is_control:
                    if producer is not None and len(key) >= 4:
                        yield LogEntry(None, None, producer, struct.unpack_from(">h", key, 2)[0])
                else:
                    yield LogEntry(key, value, producer, None)


CONTROL_ABORT, CONTROL_COMMIT = 0, 1
"""Control record types (the key's second int16): the two transaction markers."""


def control_type(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int | None:
    """The type of the control record of the control batch at ``header.position`` in ``buf``
    (a transaction marker: :data:`CONTROL_ABORT` or :data:`CONTROL_COMMIT`), read from its
    first record's key without decoding the rest; None when ``header`` is no (readable,
    uncompressed) control batch."""
    if not header.is_control or header.compression or header.record_count < 1:
        return None
    data = bytes(buf[header.position + BATCH_OVERHEAD:header.end])
    try:
        pos = read_varint(data, 0)[1] + 1  # record length, attributes
        pos = read_varint(data, read_varint(data, pos)[1])[1]  # timestamp, offset deltas
        key_len, pos = read_varint(data, pos)
        if key_len < 4:
            return None
        return int(struct.unpack_from(">h", data, pos + 2)[0])
    except (IndexError, struct.error, CorruptRecordError):
        return None


def encode_marker(commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                  timestamp_ms: int) -> bytes:
    """A transaction marker as Kafka writes it: a transactional control batch of one record,
    key {version int16 0, type int16}, value {version int16 0, coordinator_epoch int32}."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    builder = BatchBuilder()
    builder.append(timestamp_ms, key, value, ())
    return builder.build(producer_id=producer_id, producer_epoch=producer_epoch,
                         transactional=True, control=True)
