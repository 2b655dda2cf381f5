"""Helpers shared by the log tests."""

from __future__ import annotations

import shutil

from samsa.log import PartitionLog
from samsa.protocol.batch import BatchHeader, check_batch
from tests.protocol.recordbuild import batch, values

__all__ = ["all_batches", "batch", "crash", "fill", "headers_of", "values"]


def fill(log: PartitionLog, n_batches: int, per_batch: int = 3, ts0: int = 1_000) -> None:
    """Append ``n_batches`` batches of ``per_batch`` records, timestamps ts0, ts0+1, ..."""
    for i in range(n_batches):
        log.append(batch(*values(per_batch, prefix=b"b%d-" % i), ts=ts0 + i), now_ms=ts0 + i)


def headers_of(data: bytes | memoryview) -> list[BatchHeader]:
    """Headers of the whole batches in ``data`` (CRC-checked; compacted batches allowed)."""
    headers = []
    pos = 0
    while pos < len(data):
        h = check_batch(data, pos, strict=False)
        headers.append(h)
        pos = h.end
    return headers


def all_batches(log: PartitionLog, max_bytes: int = 1 << 20) -> list[BatchHeader]:
    """Every batch a consumer reading from the log start gets, in order."""
    out: list[BatchHeader] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        if not data:
            break
        for h in headers_of(data):
            out.append(h)
            offset = h.next_offset
    return out


def crash(log: PartitionLog) -> None:
    """Leave the log's directory as kill -9 would: whatever reached the OS, nothing more.

    The files are copied aside, the log is closed (releasing its descriptors; its index and
    checkpoint writes go to the original directory) and the copy is put back in its place.
    """
    directory = log.directory
    at_crash = directory.with_name(directory.name + "-at-crash")
    shutil.copytree(directory, at_crash)
    log.close()
    shutil.rmtree(directory)
    at_crash.rename(directory)
