"""Tiny per-partition checkpoint files holding one integer, replaced atomically, and the
directory fsync that makes file renames durable."""

from __future__ import annotations

import os
from pathlib import Path

from .index import write_atomically

__all__ = [
    "CLEANER_OFFSET",
    "LOG_START_OFFSET",
    "RECOVERY_POINT",
    "fsync_dir",
    "read_offset",
    "write_offset",
]

RECOVERY_POINT = "recovery-point"
"""Offset below which every batch was fsynced."""
LOG_START_OFFSET = "log-start-offset"
CLEANER_OFFSET = "cleaner-offset"
"""First offset not yet compacted (the start of the dirty section)."""


def read_offset(directory: Path, name: str) -> int | None:
    """The stored integer, or None if the file is missing or unreadable."""
    try:
        text = (directory / name).read_text(encoding="ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def write_offset(directory: Path, name: str, value: int) -> None:
    """Replace the checkpoint via temporary file + rename (never torn)."""
    write_atomically(directory / name, f"{value}\n".encode("ascii"))


def fsync_dir(directory: Path) -> None:
    """Make the renames, creations and deletions of files in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
