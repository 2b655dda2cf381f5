"""Segment-level writes: vectored appends land back to back, whatever their number."""

from __future__ import annotations

from pathlib import Path

from samsa.log.segment import Segment


def test_write_appends_parts_in_order_across_many_iovecs(tmp_path: Path) -> None:
    seg = Segment.create(tmp_path, 0)
    parts: list[bytes | memoryview] = []
    for i in range(3000):  # more than one pwritev call (IOV_MAX is 1024)
        chunk = bytes([i % 251]) * (1 + i % 7)
        parts.append(memoryview(chunk) if i % 2 else chunk)
    parts.insert(10, b"")  # empty parts are skipped
    seg.write(parts)
    seg.write([b"tail"])
    expected = b"".join(bytes(p) for p in parts) + b"tail"
    assert seg.size == len(expected)
    assert (tmp_path / f"{0:020d}.log").read_bytes() == expected
    seg.close()
