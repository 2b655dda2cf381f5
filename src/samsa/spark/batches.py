"""Arrow columns -> Kafka v2 record batches, for the writer.

The writer's rows arrive as Arrow batches; their keys, values and headers are encoded
straight from the Arrow buffers, without a Python object per row, by the C extension
``samsa.spark._columnar`` (built with samsa when a C compiler is there): the records
section of a batch for any selection of rows (:func:`encode_records`, framed by
:func:`frame`: header, compression, producer id and sequence, CRC-32C) and the Java
client's murmur2 partition of every key (:func:`key_partitions`). Without the extension
the writer hands the rows as Python objects to the client's encoder
(``protocol.records.encode_batch``) and partitioner; the tests hold the C path to their
bytes and partitions.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from samsa.client.partitioner import partition_for_key
from samsa.protocol.records import compress
from samsa.spark.arrow import BATCH_HEADER_SIZE

try:
    from samsa.spark import _columnar as _native
except ImportError:  # not built (no C compiler when samsa was installed): Python below
    _native = None  # type: ignore[assignment]

__all__ = ["NATIVE", "Binary", "Headers", "binary_column", "encode_records", "frame",
           "header_column", "key_partitions", "native"]

NATIVE = _native is not None
"""Whether the C extension is built."""


def native() -> bool:
    """Whether the C extension encodes records and partitions keys (tests turn it off)."""
    return _native is not None

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12
_CRC_START = 21


class Binary(NamedTuple):
    """An Arrow binary column: int32 offsets (one more than rows) into ``data``, and
    ``valid`` (one byte per row) when it has nulls."""

    offsets: np.ndarray[Any, Any]
    data: Any  # a buffer
    valid: np.ndarray[Any, Any] | None

    def lengths(self) -> np.ndarray[Any, Any]:
        """Bytes per row (0 for nulls)."""
        n = np.diff(self.offsets).astype(np.int64)
        return n if self.valid is None else np.where(self.valid.astype(bool), n, 0)


class Headers(NamedTuple):
    """A ``headers`` column: ``lists`` (offsets index the headers; data None), keys, values."""

    lists: Binary
    keys: Binary
    values: Binary

    def sizes(self) -> np.ndarray[Any, Any]:
        """Bytes of each row's headers as the batch accounting counts them."""
        per = self.keys.lengths() + self.values.lengths() + 2
        total = np.concatenate([[0], np.cumsum(per)])
        n = total[self.lists.offsets[1:]] - total[self.lists.offsets[:-1]]
        return n if self.lists.valid is None else np.where(self.lists.valid.astype(bool), n, 0)


def _valid(arr: pa.Array) -> np.ndarray[Any, Any] | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), np.uint8)


def binary_column(arr: pa.Array | None, n: int) -> Binary:
    """A binary or string Arrow array (None: ``n`` nulls) as :class:`Binary`, no copies."""
    if arr is None:
        return Binary(np.zeros(n + 1, np.int32), b"", np.zeros(n, np.uint8))
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.binary())
    elif pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    _, offsets, data = arr.buffers()
    at = arr.offset
    return Binary(np.frombuffer(offsets, np.int32)[at : at + len(arr) + 1],
                  data if data is not None else b"", _valid(arr))


def header_column(arr: pa.Array | None) -> Headers | None:
    """An ``array<struct<key: string, value: binary or string>>`` column (None: none)."""
    if arr is None or arr.null_count == len(arr):
        return None
    keys, values = arr.values.flatten()
    lists = Binary(arr.offsets.to_numpy(), None, _valid(arr))
    return Headers(lists, binary_column(keys, len(keys)), binary_column(values, len(values)))


def key_partitions(keys: Binary, count: int) -> np.ndarray[Any, Any]:
    """The Java client's partition of each key (``toPositive(murmur2) % count``); -1 for
    null keys."""
    if _native is not None:
        return np.frombuffer(_native.partitions(tuple(keys), count), np.int32)
    data = memoryview(keys.data)
    off = keys.offsets.tolist()
    valid = None if keys.valid is None else keys.valid.tolist()
    return np.array([partition_for_key(bytes(data[off[i] : off[i + 1]]), count)
                     if valid is None or valid[i] else -1 for i in range(len(off) - 1)],
                    np.int32)


def encode_records(rows: np.ndarray[Any, Any], first_delta: int, ts_delta: int,
                   keys: Binary, values: Binary, headers: Headers | None) -> bytes:
    """The records section of a batch holding ``rows`` (indexes) of the columns: record
    ``i`` gets offset delta ``first_delta + i`` and timestamp delta ``ts_delta``. Needs the
    C extension (:data:`NATIVE`); without it the writer encodes with the client's
    ``encode_batch``."""
    if _native is None:
        raise RuntimeError("samsa.spark._columnar is not built")
    hs = None if headers is None else (
        tuple(headers.lists), tuple(headers.keys), tuple(headers.values))
    return _native.encode(np.ascontiguousarray(rows, np.int64), first_delta, ts_delta,
                          tuple(keys), tuple(values), hs)


def frame(body: bytes, count: int, base_ts: int, max_ts: int, *, compression: int = 0,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A v2 batch (base offset 0, CreateTime) of ``count`` records encoded in ``body``."""
    payload = compress(compression, body) if compression else body
    header = bytearray(_HEADER.pack(
        0, BATCH_HEADER_SIZE - _LOG_OVERHEAD + len(payload), -1, 2, 0, compression,
        count - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count))
    crc = crc32c(payload, crc32c(memoryview(header)[_CRC_START:]))
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + payload
