"""One segment: a ``<base offset>.log`` file of v2 batches and its two sparse indexes.

A segment object is cheap while unloaded (base offset and size only, no file descriptor);
:meth:`Segment.load` opens it and brings its indexes into memory, :meth:`Segment.unload`
gives that back. The partition log keeps only its active segment and a few recently read
ones loaded.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from samsa.protocol.batch import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidRecords,
    check_batch,
    header_from_bytes,
)

from .index import OffsetIndex, TimeIndex, write_atomically

__all__ = ["INT32_MAX", "Segment", "read_batches", "segment_name"]

INT32_MAX = 2**31 - 1
_LENGTH = struct.Struct(">i")
_MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD
_IOV_MAX = 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    """A segment file plus (when loaded) its in-memory indexes and running statistics."""

    def __init__(self, directory: Path, base_offset: int, size: int = 0) -> None:
        self.directory = directory
        self.base_offset = base_offset
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}.log"
        self.index_path = directory / f"{name}.index"
        self.timeindex_path = directory / f"{name}.timeindex"
        self.size = size
        self.fd: int | None = None
        self.offset_index: OffsetIndex | None = None
        self.time_index: TimeIndex | None = None
        # Known once loaded (and kept after unload: they are small).
        self.next_offset: int | None = None
        self.max_timestamp: int = -1
        self.first_batch_timestamp: int = -1
        self.bytes_since_index = 0
        self.valid_size = 0
        self.created_ms = 0

    def __repr__(self) -> str:
        return f"Segment(base={self.base_offset}, size={self.size}, next={self.next_offset})"

    # -- files ---------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int) -> Segment:
        """Create an empty segment file (truncating any leftover) and load it."""
        seg = cls(directory, base_offset)
        seg.fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        for path in (seg.index_path, seg.timeindex_path):
            path.unlink(missing_ok=True)
        seg.offset_index = OffsetIndex()
        seg.time_index = TimeIndex()
        seg.next_offset = base_offset
        return seg

    def open_fd(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.log_path, os.O_RDWR)
        return self.fd

    def take_fd(self) -> int | None:
        """Hand the descriptor over (to the flusher); the segment reopens one when needed."""
        fd, self.fd = self.fd, None
        return fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def unload(self) -> None:
        """Close the file and drop the indexes; the summary fields stay."""
        self.close()
        self.offset_index = None
        self.time_index = None

    @property
    def loaded(self) -> bool:
        return self.offset_index is not None

    def delete_files(self) -> None:
        self.unload()
        for path in (self.log_path, self.index_path, self.timeindex_path):
            path.unlink(missing_ok=True)

    def persist_indexes(self) -> None:
        """Write both index files whole (atomic rename; no fsync: they can be rebuilt)."""
        assert self.offset_index is not None and self.time_index is not None
        if self.next_offset is not None and self.max_timestamp >= 0:
            self.time_index.append(
                self.max_timestamp, self.next_offset - self.base_offset, force=True
            )
        write_atomically(self.index_path, self.offset_index.to_bytes())
        write_atomically(self.timeindex_path, self.time_index.to_bytes())

    # -- reading -----------------------------------------------------------------------
    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.open_fd(), size, position)

    def header_at(self, position: int) -> BatchHeader | None:
        """The batch header at ``position`` if a whole header can be read there."""
        if position + BATCH_OVERHEAD > self.size:
            return None
        data = self.pread(BATCH_OVERHEAD, position)
        if len(data) < BATCH_OVERHEAD:
            return None
        return header_from_bytes(data, position)

    def batches(self, position: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Whole batches from ``position`` to the end (stops at a malformed one)."""
        return read_batches(self.open_fd(), self.size, position)

    def headers(self, position: int = 0) -> Iterator[BatchHeader]:
        """Plausible batch headers from ``position`` to the end, without reading bodies."""
        while True:
            header = self.header_at(position)
            if header is None or not _plausible(header, self.size):
                return
            yield header
            position = header.end

    def find_position(self, offset: int) -> BatchHeader | None:
        """Header of the first batch whose last offset is >= ``offset``."""
        self.load()
        assert self.offset_index is not None
        _, position = self.offset_index.floor(offset - self.base_offset)
        for header in self.headers(position):
            if header.last_offset >= offset:
                return header
        return None

    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one containing ``offset``; at least one if any.

        A read cut short of ``max_bytes`` at a batch boundary is returned as a memoryview
        of the buffer read (no copy of what may be megabytes)."""
        first = self.find_position(offset)
        if first is None:
            return b""
        want = min(max(max_bytes, first.size), self.size - first.position)
        data = self.pread(want, first.position)
        end = first.size
        while end + LOG_OVERHEAD <= len(data):
            (length,) = _LENGTH.unpack_from(data, end + 8)
            nxt = end + LOG_OVERHEAD + length
            if length < _MIN_BATCH_LENGTH or nxt > len(data):
                break
            end = nxt
        return data if end == len(data) else memoryview(data)[:end]

    # -- appending -----------------------------------------------------------------------
    def note_batch(self, header: BatchHeader, position: int, interval: int) -> None:
        """Account for a batch appended (or found by a scan) at file ``position``."""
        assert self.offset_index is not None and self.time_index is not None
        rel = header.base_offset - self.base_offset
        if self.bytes_since_index > interval:
            self.offset_index.append(rel, position)
            self.time_index.append(self.max_timestamp, rel)
            self.bytes_since_index = 0
        self.bytes_since_index += header.size
        if self.first_batch_timestamp < 0 and self.next_offset == self.base_offset:
            self.first_batch_timestamp = header.max_timestamp
        self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        self.next_offset = header.next_offset

    def write(self, parts: list[bytes | memoryview]) -> None:
        """Append ``parts`` back to back at the end of the file (reaches the OS, no fsync)."""
        fd = self.open_fd()
        position = self.size
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        i = 0
        while i < len(views):
            written = os.pwritev(fd, views[i : i + _IOV_MAX], position)
            position += written
            while i < len(views) and written >= len(views[i]):
                written -= len(views[i])
                i += 1
            if written:
                views[i] = views[i][written:]
        self.size = position

    # -- loading, scanning, recovery -------------------------------------------------------
    def _reset_stats(self) -> None:
        self.offset_index = OffsetIndex()
        self.time_index = TimeIndex()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.first_batch_timestamp = -1
        self.bytes_since_index = 0

    def load(self, interval: int = 4096) -> None:
        """Bring the indexes into memory, from their files if consistent, else rebuilt."""
        if self.loaded:
            return
        self.size = os.fstat(self.open_fd()).st_size
        if not self._load_from_files():
            self.scan(interval)
            self.persist_indexes()

    def _load_from_files(self) -> bool:
        offset_index = OffsetIndex.load(self.index_path)
        time_index = TimeIndex.load(self.timeindex_path)
        if offset_index is None or time_index is None:
            return False
        position, rel = 0, 0
        if len(offset_index):
            rel, position = offset_index.rel_offsets[-1], offset_index.positions[-1]
            header = self.header_at(position)
            if header is None or header.base_offset != self.base_offset + rel:
                return False
        next_offset, tail_max = self.base_offset + rel, -1
        end = position
        for header in self.headers(position):
            next_offset, end = header.next_offset, header.end
            tail_max = max(tail_max, header.max_timestamp)
        if end != self.size:
            return False
        if self.size and (
            not len(time_index)
            or time_index.rel_offsets[-1] != next_offset - self.base_offset
            or time_index.max_timestamp < tail_max
        ):
            return False
        first = self.header_at(0)
        self.offset_index, self.time_index = offset_index, time_index
        self.next_offset = next_offset
        self.max_timestamp = time_index.max_timestamp
        self.first_batch_timestamp = first.max_timestamp if first else -1
        self.bytes_since_index = end - position
        return True

    def scan(
        self,
        interval: int,
        verify_from: int | None = None,
        min_offset: int = -1,
        *,
        contiguous: bool = False,
    ) -> bool:
        """Rebuild the indexes by walking every batch header; True if the file is whole.

        Batches whose next offset is above ``verify_from`` are read whole and checked as
        freshly produced ones (CRC, record count) and, with ``contiguous``, must start
        exactly where the previous batch (or the segment) ends: only compaction leaves
        holes, and it never touches unsynced data. The scan stops at the first malformed,
        corrupt or non-increasing batch (offsets must be >= ``min_offset`` and fit a
        relative int32); the caller may truncate there.
        """
        self.size = os.fstat(self.open_fd()).st_size
        self._reset_stats()
        position = 0
        expected = max(min_offset, self.base_offset)
        while position < self.size:
            header = self.header_at(position)
            if header is None or not _plausible(header, self.size):
                break
            if header.base_offset < expected or header.last_offset - self.base_offset > INT32_MAX:
                break
            if verify_from is not None and header.next_offset > verify_from:
                if contiguous and header.base_offset != expected:
                    break
                data = self.pread(header.size, position)
                try:
                    check_batch(data, 0, strict=contiguous)
                except InvalidRecords:
                    break
            self.note_batch(header, position, interval)
            expected = header.next_offset
            position = header.end
        self.valid_size = position
        return position == self.size

    def truncate(self, position: int) -> None:
        """Cut the file at ``position`` (a batch boundary) and rebuild the indexes."""
        os.ftruncate(self.open_fd(), position)
        for path in (self.index_path, self.timeindex_path):
            path.unlink(missing_ok=True)
        self.size = position


def read_batches(
    fd: int, size: int, position: int = 0
) -> Iterator[tuple[BatchHeader, bytes]]:
    """Whole batches of the file open at ``fd`` from ``position`` up to ``size`` bytes.

    Stops at the first malformed or short batch. Takes a descriptor rather than a segment
    so the cleaner can read with one of its own from another thread.
    """
    while position + BATCH_OVERHEAD <= size:
        head = os.pread(fd, BATCH_OVERHEAD, position)
        if len(head) < BATCH_OVERHEAD:
            return
        header = header_from_bytes(head, position)
        if not _plausible(header, size):
            return
        data = os.pread(fd, header.size, position)
        if len(data) < header.size:
            return
        yield header, data
        position = header.end


def _plausible(header: BatchHeader, file_size: int) -> bool:
    """Structural checks that need no CRC: magic, length, bounds, deltas."""
    return (
        header.magic == 2
        and header.batch_length >= _MIN_BATCH_LENGTH
        and header.end <= file_size
        and header.last_offset_delta >= 0
        and 0 <= header.record_count <= header.last_offset_delta + 1
    )
