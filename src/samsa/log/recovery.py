"""Opening a partition directory: clean leftovers, list segments, validate the tail.

Everything below the recovery point (the offset below which every batch was fsynced, kept
in the ``recovery-point`` checkpoint) is trusted. Every segment from the one holding the
recovery point onwards is scanned: batch headers must be well formed with increasing
offsets; batches past the recovery point must pass their CRC and follow their predecessor
without a hole, and a segment past it must end where its successor begins. At the first bad
batch or missing tail the segment is truncated and any later segment is deleted, so the log
reopens with a prefix of whole batches. Index files of scanned segments are rebuilt; those
of other segments are checked when first loaded and rebuilt if inconsistent.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

from .segment import Segment

__all__ = ["TEMP_SUFFIXES", "list_segments", "recover_segments"]

TEMP_SUFFIXES = (".tmp", ".cleaned", ".swap")


def list_segments(directory: Path) -> list[Segment]:
    """Remove temporary files and return the segments found, by base offset."""
    segments: list[Segment] = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(TEMP_SUFFIXES):
            os.unlink(entry.path)
            continue
        if not name.endswith(".log"):
            continue
        stem = name[: -len(".log")]
        if len(stem) != 20 or not stem.isdigit():
            continue
        segments.append(Segment(directory, int(stem), entry.stat().st_size))
    segments.sort(key=lambda s: s.base_offset)
    # Index files without a segment are leftovers of a deletion.
    bases = {s.log_path.stem for s in segments}
    for entry in os.scandir(directory):
        stem, _, ext = entry.name.partition(".")
        if ext in ("index", "timeindex") and stem not in bases:
            os.unlink(entry.path)
    return segments


def recover_segments(
    segments: list[Segment], recovery_point: int | None, interval: int
) -> tuple[list[Segment], list[Segment]]:
    """Validate segments past the recovery point; returns (kept, scanned).

    ``recovery_point`` None means unknown (checkpoint lost): every batch is CRC-checked,
    but offset holes are accepted since compaction may have made them, so a lost tail in
    a non-last segment is not detected then. Scanned segments other than the last are
    unloaded again (their indexes were persisted).
    """
    if not segments:
        return segments, []
    rp = -1 if recovery_point is None else recovery_point
    start = max(bisect_right(segments, rp, key=lambda s: s.base_offset) - 1, 0)
    scanned: list[Segment] = []
    expected = -1
    for i in range(start, len(segments)):
        seg = segments[i]
        if seg.base_offset < expected:  # overlaps its predecessor: drop it and the rest
            for later in segments[i:]:
                later.delete_files()
            segments = segments[:i]
            break
        whole = seg.scan(
            interval, verify_from=rp, min_offset=expected, contiguous=recovery_point is not None
        )
        scanned.append(seg)
        if whole and i + 1 < len(segments):
            # Rolling starts the next segment at this one's end; a shortfall past the
            # recovery point means this segment lost unsynced batches (compaction, which
            # also leaves gaps, only rewrites segments below the recovery point).
            following = segments[i + 1].base_offset
            whole = (
                seg.next_offset == following or following <= rp or recovery_point is None
            )
        if not whole:
            seg.truncate(seg.valid_size)
            for later in segments[i + 1 :]:
                later.delete_files()
            segments = segments[: i + 1]
        seg.persist_indexes()
        expected = seg.next_offset if seg.next_offset is not None else seg.base_offset
        if seg is not segments[-1]:
            seg.unload()
        if not whole:
            break
    return segments, scanned
