"""Tiny per-partition checkpoint files holding one integer, replaced atomically."""

from __future__ import annotations

from pathlib import Path

from .index import write_atomically

__all__ = ["CLEANER_OFFSET", "LOG_START_OFFSET", "RECOVERY_POINT", "read_offset", "write_offset"]

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
