"""Topics of the local engine: ``topics.json`` and one directory per partition.

Topic metadata (id, partition count, config overrides) is kept in ``topics.json`` in the
data directory, replaced atomically on every change; each partition's log lives in
``<data>/<topic>-<partition>/`` as in Kafka. A crash never leaves a directory that a topic
of the same name would reopen: a new partition's directory is cleared before
``topics.json`` names it, and a deleted topic's directories are moved aside before
``topics.json`` forgets it (leftovers are swept on the next start).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from samsa.broker.storage import TopicRecord
from samsa.log import LogConfig
from samsa.storage.local.flusher import Flusher
from samsa.storage.local.partition import LocalPartition


class LocalTopicStore:
    """The :class:`~samsa.broker.storage.TopicStore` of one data directory."""

    def __init__(self, data_dir: Path, flusher: Flusher | None = None) -> None:
        self.data_dir = data_dir
        self.flusher = flusher if flusher is not None else Flusher()
        self._records: dict[str, dict[str, Any]] = {}
        self._logs: dict[tuple[str, int], LocalPartition] = {}
        self._version = 0
        self._seen = -1

    def load(self, now_ms: int) -> None:
        """Read ``topics.json``, sweeping deletions cut short by a crash."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.data_dir.glob("*.deleted"):
            shutil.rmtree(leftover, ignore_errors=True)
        meta = self._meta_path()
        self._records = json.loads(meta.read_text()) if meta.exists() else {}
        self._version += 1

    def snapshot(self) -> list[TopicRecord] | None:
        if self._seen == self._version:
            return None
        self._seen = self._version
        return [TopicRecord(name, uuid.UUID(rec["id"]), dict(rec.get("configs", {})),
                            int(rec["partitions"])) for name, rec in self._records.items()]

    async def fetch(self) -> list[TopicRecord] | None:
        return self.snapshot()  # nothing to wait for: only this node writes the catalog

    def open_partition(self, topic: str, index: int, config: LogConfig, now_ms: int,
                       wake: Callable[[], None]) -> LocalPartition:
        log = LocalPartition.open_with(self._dir(topic, index), config, self.flusher,
                                       now_ms=now_ms)
        self._logs[(topic, index)] = log
        return log

    async def create(self, record: TopicRecord) -> bool:
        return self.create_now(record)  # nothing to wait for: a local file

    def create_now(self, record: TopicRecord) -> bool:
        if record.name in self._records:
            return False
        self._clear_orphans(record.name, 0, record.partitions)
        self._change(record.name, {"id": str(record.topic_id), "partitions": record.partitions,
                                   "configs": dict(record.overrides)})
        return True

    async def add_partitions(self, name: str, current: int, total: int) -> None:
        self._clear_orphans(name, current, total)
        self._change(name, {**self._records[name], "partitions": total})

    async def alter(self, name: str, overrides: Mapping[str, str]) -> None:
        self._change(name, {**self._records[name], "configs": dict(overrides)})

    async def delete(self, name: str, topic_id: uuid.UUID) -> bool:
        """Close the topic's logs and move their directories aside before ``topics.json``
        forgets it, then remove them."""
        rec = self._records.get(name)
        if rec is None or uuid.UUID(rec["id"]) != topic_id:
            return False
        doomed = []
        for index in range(int(rec["partitions"])):
            log = self._logs.pop((name, index), None)
            if log is not None:
                log.close()
            directory = self._dir(name, index)
            aside = directory.with_name(f"{directory.name}.{uuid.UUID(rec['id']).hex}.deleted")
            if directory.exists():
                os.replace(directory, aside)
                doomed.append(aside)
        self._change(name, None)
        for aside in doomed:
            shutil.rmtree(aside, ignore_errors=True)
        return True

    # -- internals ----------------------------------------------------------------------
    def _clear_orphans(self, name: str, first: int, end: int) -> None:
        """A directory already there for a new partition is an orphan (a create cut short
        before ``topics.json`` was written): cleared, never reopened."""
        for index in range(first, end):
            directory = self._dir(name, index)
            if directory.exists():
                shutil.rmtree(directory)

    def _change(self, name: str, rec: dict[str, Any] | None) -> None:
        """Persist ``name``'s new record (None: gone); on failure nothing changes."""
        records = dict(self._records)
        if rec is None:
            records.pop(name, None)
        else:
            records[name] = rec
        self._save(records)
        self._records = records
        self._version += 1

    def _dir(self, name: str, partition: int) -> Path:
        return self.data_dir / f"{name}-{partition}"

    def _meta_path(self) -> Path:
        return self.data_dir / "topics.json"

    def _save(self, records: dict[str, dict[str, Any]]) -> None:
        tmp = self._meta_path().with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(records, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._meta_path())
        dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
