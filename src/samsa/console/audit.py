"""The console's audit log: every changing action (and every preview) as one JSON line,
with who asked (the principal the console acts as), what, and how it ended."""

from __future__ import annotations

import json
import threading
from collections import deque
from pathlib import Path
from typing import Any


class AuditLog:
    """Appends to ``path`` (if given) and keeps the last ``keep`` entries in memory."""

    def __init__(self, path: Path | None, keep: int = 500) -> None:
        self.path = path
        self.entries: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()
        if path is not None and path.exists():
            for line in path.read_text(errors="replace").splitlines()[-keep:]:
                try:
                    self.entries.append(json.loads(line))
                except ValueError:
                    continue

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.entries.append(entry)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    f.write(json.dumps(entry, sort_keys=True) + "\n")

    def recent(self, group_id: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            found = [e for e in self.entries if group_id is None or e.get("group") == group_id]
        return list(reversed(found))
