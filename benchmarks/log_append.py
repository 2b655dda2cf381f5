"""Raw partition-log throughput: append, read back, and append+fsync per batch.

Usage: .venv/bin/python benchmarks/log_append.py [--mb 200] [--batch-kb 16]
Prints MB/s figures; no broker or network involved.
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from samsa.log import LogConfig, PartitionLog


def make_batch(payload: int, records: int = 10) -> bytes:
    """One uncompressed v2 batch of ``records`` records totalling about ``payload`` bytes."""

    def varint(v: int) -> bytes:
        zz = (v << 1) ^ (v >> 63)
        out = bytearray()
        while zz > 0x7F:
            out.append((zz & 0x7F) | 0x80)
            zz >>= 7
        out.append(zz)
        return bytes(out)

    value = b"x" * max(1, payload // records)
    body = b""
    for i in range(records):
        rec = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(value)) + value + varint(0)
        body += varint(len(rec)) + rec
    after = struct.pack(">hiqqqhii", 0, records - 1, 0, 0, -1, -1, -1, records) + body
    return struct.pack(">qiibI", 0, 9 + len(after), 0, 2, crc32c(after)) + after


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--fsync-batches", type=int, default=200)
    args = parser.parse_args()
    blob = make_batch(args.batch_kb * 1024)
    count = args.mb * 1024 * 1024 // len(blob)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LogConfig.from_mapping({"segment.bytes": str(64 * 1024 * 1024)})
        log = PartitionLog.open(Path(tmp) / "p0", cfg, now_ms=0)
        t0 = time.perf_counter()
        for _ in range(count):
            log.append(blob, now_ms=0)
        t1 = time.perf_counter()
        log.flush()
        t2 = time.perf_counter()
        total = count * len(blob)
        offset, got = 0, 0
        while offset < log.log_end_offset:
            data = log.read(offset, 1024 * 1024)
            got += len(data)
            pos = 0
            while pos < len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                last_delta = struct.unpack_from(">i", data, pos + 23)[0]
                offset = base + last_delta + 1
                pos += 12 + length
        t3 = time.perf_counter()
        fsync_t0 = time.perf_counter()
        for _ in range(args.fsync_batches):
            log.append(blob, now_ms=0)
            log.flush()
        fsync_t1 = time.perf_counter()
        log.close()
    mb = total / 2**20
    print(f"batch {len(blob)} B, {count} batches, {mb:.0f} MiB")
    print(f"append (to OS):  {mb / (t1 - t0):8.1f} MiB/s  {count / (t1 - t0):9.0f} batches/s")
    print(f"final fsync:     {t2 - t1:8.3f} s")
    print(f"read (1 MiB):    {got / 2**20 / (t3 - t2):8.1f} MiB/s")
    per = (fsync_t1 - fsync_t0) / args.fsync_batches * 1000
    print(f"append+fsync:    {per:8.2f} ms per batch (no group commit)")


if __name__ == "__main__":
    main()
