"""Producer id allocation that stays unique across restarts.

Ids are handed out from blocks; the end of the current block is persisted (written and
fsynced) before any id of it is used, so a restarted broker starts past every id it may
have given out.
"""

from __future__ import annotations

import os
from pathlib import Path

BLOCK = 1000


class ProducerIdAllocator:
    """Allocates producer ids, persisting the reserved block in ``path``."""

    def __init__(self, path: Path) -> None:
        self._path = path
        try:
            self._next = int(path.read_text().strip() or 0)
        except FileNotFoundError:
            self._next = 0
        except ValueError:
            raise ValueError(f"corrupt producer id file {path}") from None
        self._limit = self._next

    def allocate(self) -> int:
        """A fresh producer id."""
        if self._next >= self._limit:
            self._reserve(self._next + BLOCK)
        pid = self._next
        self._next += 1
        return pid

    def _reserve(self, limit: int) -> None:
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(limit))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._limit = limit
