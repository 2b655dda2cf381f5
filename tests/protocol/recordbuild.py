"""Test helper: encode real Kafka v2 record batches (independently of samsa's code)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam
from crc32c import crc32c

Rec = tuple[bytes | None, bytes | None]


def varint(value: int) -> bytes:
    zz = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zz & 0x7F
        zz >>= 7
        if zz:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return varint(-1)
    return varint(len(value)) + value


def encode_record(key: bytes | None, value: bytes | None, ts_delta: int, off_delta: int) -> bytes:
    body = b"\x00" + varint(ts_delta) + varint(off_delta) + _bytes_field(key)
    body += _bytes_field(value) + varint(0)
    return varint(len(body)) + body


@dataclass
class BatchSpec:
    records: Sequence[Rec]
    base_offset: int = 0
    base_timestamp: int = 1_000
    timestamps: Sequence[int] | None = None
    offset_deltas: Sequence[int] | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    compression: int = 0
    attributes: int = 0
    leader_epoch: int = 0


def compress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    return data


def build(spec: BatchSpec) -> bytes:
    n = len(spec.records)
    ts = list(spec.timestamps) if spec.timestamps is not None else [spec.base_timestamp] * n
    deltas = list(spec.offset_deltas) if spec.offset_deltas is not None else list(range(n))
    base_ts = ts[0] if ts else spec.base_timestamp
    section = b"".join(
        encode_record(k, v, t - base_ts, d)
        for (k, v), t, d in zip(spec.records, ts, deltas, strict=True)
    )
    section = compress(spec.compression, section)
    last_delta = deltas[-1] if deltas else 0
    attrs = spec.attributes | spec.compression
    after_crc = struct.pack(
        ">hiqqqhii",
        attrs,
        last_delta,
        base_ts,
        max(ts) if ts else base_ts,
        spec.producer_id,
        spec.producer_epoch,
        spec.base_sequence,
        n,
    ) + section
    crc = crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", spec.base_offset, length, spec.leader_epoch, 2, crc) + after_crc


def batch(
    *records: Rec,
    ts: int = 1_000,
    timestamps: Sequence[int] | None = None,
    **kw: int,
) -> bytes:
    return build(BatchSpec(list(records), base_timestamp=ts, timestamps=timestamps, **kw))


def values(n: int, prefix: bytes = b"v", key: bytes | None = None) -> list[Rec]:
    return [(key, prefix + str(i).encode()) for i in range(n)]
