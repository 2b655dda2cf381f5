"""Sparse offset and time indexes of one segment, held in compact arrays.

Files (big-endian, Kafka-like layout, but written whole and atomically rather than mmapped
and preallocated, so an idle partition costs no memory for them):

* ``.index``: entries of (relative offset int32, file position int32). An entry is the base
  offset and position of a batch; one is added whenever ``index.interval.bytes`` were
  written since the previous one.
* ``.timeindex``: entries of (timestamp int64, relative offset int32) meaning "every batch
  of the segment with a base offset below this offset has a max timestamp <= timestamp".
  Both columns are non-decreasing; the last entry written on roll holds the segment's max.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex", "write_atomically"]

_TIME_ENTRY = struct.Struct(">qi")


def write_atomically(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` with ``data`` via a temporary file and rename."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class OffsetIndex:
    """Relative offset -> file position, for batch starts."""

    __slots__ = ("positions", "rel_offsets")

    def __init__(self) -> None:
        self.rel_offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.rel_offsets)

    def append(self, rel_offset: int, position: int) -> None:
        if self.rel_offsets and (
            rel_offset <= self.rel_offsets[-1] or position <= self.positions[-1]
        ):
            return
        self.rel_offsets.append(rel_offset)
        self.positions.append(position)

    def floor(self, rel_offset: int) -> tuple[int, int]:
        """Greatest entry with offset <= ``rel_offset``, or (0, 0) (segment start)."""
        i = bisect_right(self.rel_offsets, rel_offset)
        if i == 0:
            return 0, 0
        return self.rel_offsets[i - 1], self.positions[i - 1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position``."""
        i = bisect_left(self.positions, position)
        del self.rel_offsets[i:]
        del self.positions[i:]

    def to_bytes(self) -> bytes:
        inter = array("i", [0]) * (2 * len(self))
        inter[0::2] = self.rel_offsets
        inter[1::2] = self.positions
        if sys.byteorder == "little":
            inter.byteswap()
        return inter.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> OffsetIndex | None:
        """Parse; None if the data is not a well-formed increasing index."""
        if len(data) % 8:
            return None
        inter = array("i")
        inter.frombytes(data)
        if sys.byteorder == "little":
            inter.byteswap()
        index = cls()
        index.rel_offsets = inter[0::2]
        index.positions = inter[1::2]
        rel, pos = index.rel_offsets, index.positions
        for i in range(1, len(rel)):
            if rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]:
                return None
        if rel and (rel[0] < 0 or pos[0] < 0):
            return None
        return index

    @classmethod
    def load(cls, path: Path) -> OffsetIndex | None:
        data = _read(path)
        return None if data is None else cls.from_bytes(data)


class TimeIndex:
    """Max timestamp so far -> relative offset; see the module docstring."""

    __slots__ = ("rel_offsets", "timestamps")

    def __init__(self) -> None:
        self.timestamps = array("q")
        self.rel_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def max_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def append(self, timestamp: int, rel_offset: int, *, force: bool = False) -> None:
        """Add (timestamp, offset) if it grows the index (``force``: even at equal time)."""
        if self.timestamps:
            if timestamp < self.timestamps[-1] or rel_offset <= self.rel_offsets[-1]:
                return
            if timestamp == self.timestamps[-1] and not force:
                return
        elif timestamp < 0:
            return
        self.timestamps.append(timestamp)
        self.rel_offsets.append(rel_offset)

    def start_for(self, timestamp: int) -> int:
        """Relative offset from which a scan for the first batch with ts >= ``timestamp``
        may start (every batch below it has a smaller max timestamp)."""
        i = bisect_left(self.timestamps, timestamp)
        return self.rel_offsets[i - 1] if i else 0

    def truncate_to_offset(self, rel_offset: int) -> None:
        """Drop entries claiming knowledge of batches at or past ``rel_offset``."""
        i = bisect_right(self.rel_offsets, rel_offset)
        del self.timestamps[i:]
        del self.rel_offsets[i:]

    def to_bytes(self) -> bytes:
        return b"".join(
            _TIME_ENTRY.pack(ts, rel)
            for ts, rel in zip(self.timestamps, self.rel_offsets, strict=True)
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> TimeIndex | None:
        if len(data) % _TIME_ENTRY.size:
            return None
        index = cls()
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if index.timestamps and (
                ts < index.timestamps[-1] or rel <= index.rel_offsets[-1]
            ):
                return None
            if rel < 0:
                return None
            index.timestamps.append(ts)
            index.rel_offsets.append(rel)
        return index

    @classmethod
    def load(cls, path: Path) -> TimeIndex | None:
        data = _read(path)
        return None if data is None else cls.from_bytes(data)
