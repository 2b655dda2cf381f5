from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.log import LogConfig, PartitionLog

OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[OpenLog]:
    """open_log(now_ms=..., **{"segment.bytes": "..."}) -> PartitionLog in tmp_path/p0."""
    opened: list[PartitionLog] = []

    def _open(now_ms: int = 1_000, directory: Path | None = None, **config: str) -> PartitionLog:
        cfg = LogConfig.from_mapping({k.replace("_", "."): v for k, v in config.items()})
        log = PartitionLog.open(directory or tmp_path / "p0", cfg, now_ms=now_ms)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()
