"""The cleaner of one partition log: plans, rewrites and installs compacted segments.

A compaction runs in three steps (Kafka's LogCleaner does the same on its own threads):

1. :meth:`Cleaner.plan` (the appending thread) picks the leading non-active segments that
   are fsynced, older than min.compaction.lag.ms and dirty enough;
2. :meth:`Cleaner.clean` (any thread, slow) writes each one's ``.cleaned`` file from its own
   descriptors, sharing no state with the log (:meth:`Cleaner.stop` aborts it);
3. :meth:`Cleaner.install` (the appending thread) renames the cleaned files over the
   segments still in the log and gives back what the log must drop from its lists.

The log tells the cleaner when it is truncated (:meth:`Cleaner.truncated`: a plan made
before is not installed) and closed (:meth:`Cleaner.stop`). The per-record rules are in
:mod:`samsa.log.compaction`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .checkpoint import CLEANER_OFFSET, fsync_dir, read_offset, write_offset
from .compaction import (
    AbortedRanges,
    CleanPolicy,
    KeyMap,
    aborted_ranges,
    add_to_key_map,
    clean_batch,
)
from .config import LogConfig
from .producer_state import ProducerStateManager
from .segment import Segment, read_batches

__all__ = ["NOTHING_CLEANED", "Cleaner", "CompactionPlan", "CompactionStats", "Installed"]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Segments chosen for cleaning, as sized when chosen (see PartitionLog.compact)."""

    segments: tuple[Segment, ...]
    sizes: tuple[int, ...]
    end: int  # base offset of the first segment not cleaned
    delete_horizon_ms: int  # tombstones older than this are dropped
    truncations: int  # the log's truncation count when planned
    aborted: AbortedRanges = field(default_factory=dict)  # aborted transactions, when planned


@dataclass(frozen=True, slots=True)
class CompactionStats:
    segments_cleaned: int
    bytes_before: int
    bytes_after: int


NOTHING_CLEANED = CompactionStats(0, 0, 0)


@dataclass(frozen=True, slots=True)
class Installed:
    """What :meth:`Cleaner.install` did; the log updates its segment list from it."""

    stats: CompactionStats
    rewritten: tuple[Segment, ...] = ()
    """Segments whose file was replaced (now unloaded: the log forgets their cached state)."""
    emptied: tuple[Segment, ...] = ()
    """Segments left with no batch (unloaded): the log drops them and deletes their files."""


class Cleaner:
    """Compaction state of one log: a plan in progress, the truncation count, the abort flag.

    Only :meth:`clean` and :meth:`stop` may run off the appending thread.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._planned = False  # a plan is out and not yet installed
        self._truncations = 0  # a plan made before a truncation is not installed
        self._lock = threading.Lock()  # held while clean() writes .cleaned files
        self._abort = False

    @property
    def busy(self) -> bool:
        """A plan was handed out and not yet installed."""
        return self._planned

    def plan(
        self,
        segments: Sequence[Segment],
        durable: int,
        max_timestamp: Callable[[Segment], int],
        config: LogConfig,
        now_ms: int,
        producers: ProducerStateManager | None = None,
    ) -> CompactionPlan | None:
        """Choose among the log's ``segments`` (oldest first, the active one last).

        Only segments wholly below ``durable`` (the checkpointed recovery point) qualify:
        recovery relies on segments past it being contiguous, which cleaning does not
        preserve; nor past the last stable offset of ``producers`` (an open transaction's
        batches are not judged). ``max_timestamp`` gives a segment's largest timestamp. None if no
        compaction is due or one is already planned.
        """
        if self._planned:
            return None
        horizon = now_ms - config.min_compaction_lag_ms
        if producers is not None:
            durable = min(durable, producers.last_stable_offset(durable))
        candidates: list[Segment] = []
        for i, seg in enumerate(segments[:-1]):
            if segments[i + 1].base_offset > durable:
                break
            if max_timestamp(seg) > horizon:
                break
            candidates.append(seg)
        if not candidates:
            return None
        end = segments[len(candidates)].base_offset
        dirty_from = read_offset(self.directory, CLEANER_OFFSET) or 0
        total = sum(s.size for s in candidates)
        dirty = sum(s.size for s in candidates if s.base_offset >= dirty_from)
        if total == 0 or dirty / total < config.min_cleanable_dirty_ratio or dirty == 0:
            return None
        self._planned = True
        return CompactionPlan(
            tuple(candidates), tuple(s.size for s in candidates), end,
            now_ms - config.delete_retention_ms, self._truncations,
            aborted_ranges(producers.aborted) if producers is not None else {},
        )

    def clean(self, plan: CompactionPlan) -> list[int] | None:
        """Write the ``.cleaned`` file of every planned segment; returns their sizes.

        Safe on a worker thread while the log keeps serving: it reads the planned (no
        longer written) segment files through descriptors of its own and touches no
        shared state. Returns None if the log was closed meanwhile (or a file vanished).
        """
        with self._lock:
            written: list[Path] = []
            sizes = None
            try:
                sizes = self._clean_files(plan, written)
            except FileNotFoundError:
                sizes = None
            finally:
                if sizes is None or self._abort:
                    sizes = None
                    for path in written:
                        path.unlink(missing_ok=True)
            return sizes

    def _clean_files(self, plan: CompactionPlan, written: list[Path]) -> list[int] | None:
        key_map: KeyMap = {}
        for seg, size in zip(plan.segments, plan.sizes, strict=True):
            with _open_read(seg.log_path) as fd:
                for header, batch in read_batches(fd, size):
                    if self._abort:
                        return None
                    add_to_key_map(key_map, header, batch, plan.aborted)
        policy = CleanPolicy(key_map, plan.delete_horizon_ms, plan.aborted)
        sizes = []
        for seg, size in zip(plan.segments, plan.sizes, strict=True):
            tmp = cleaned_path(seg)
            written.append(tmp)
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            cleaned_size = 0
            try:
                with _open_read(seg.log_path) as fd:
                    for header, batch in read_batches(fd, size):
                        if self._abort:
                            return None
                        cleaned = clean_batch(header, batch, policy)
                        if cleaned is not None:
                            cleaned_size += _write_all(out, cleaned)
                if self._abort:
                    return None
                os.fsync(out)
            finally:
                os.close(out)
            sizes.append(cleaned_size)
        return sizes

    def install(
        self,
        plan: CompactionPlan,
        sizes: list[int] | None,
        inactive: Sequence[Segment],
        index_interval: int,
    ) -> Installed:
        """Swap the cleaned files in for the planned segments still among ``inactive``
        (the log's non-active segments, oldest first). Must follow every :meth:`plan`,
        with ``sizes=None`` if cleaning failed; a stale plan only has its files removed.

        A segment cleaned to nothing (but the first) keeps its files: the log removes it
        from its list, then deletes them (see :class:`Installed`).
        """
        self._planned = False
        if sizes is None or self._abort or plan.truncations != self._truncations:
            for seg in plan.segments:
                cleaned_path(seg).unlink(missing_ok=True)
            return Installed(NOTHING_CLEANED)
        after = 0
        rewritten: list[Segment] = []
        emptied: list[Segment] = []
        for seg, size in zip(plan.segments, sizes, strict=True):
            tmp = cleaned_path(seg)
            if not any(s is seg for s in inactive):
                tmp.unlink(missing_ok=True)  # removed by retention meanwhile
                continue
            seg.unload()
            after += size
            if size == 0 and seg is not inactive[0]:
                tmp.unlink()
                emptied.append(seg)
            else:
                for path in (seg.index_path, seg.timeindex_path):
                    path.unlink(missing_ok=True)
                os.replace(tmp, seg.log_path)
                seg.size = size
                seg.scan(index_interval)
                seg.persist_indexes()
                seg.unload()
                rewritten.append(seg)
        fsync_dir(self.directory)
        write_offset(self.directory, CLEANER_OFFSET, plan.end)
        stats = CompactionStats(len(plan.segments), sum(plan.sizes), after)
        return Installed(stats, tuple(rewritten), tuple(emptied))

    def truncated(self, log_end_offset: int) -> None:
        """The log was truncated: outstanding plans are stale; the checkpoint follows."""
        self._truncations += 1
        cleaned_to = read_offset(self.directory, CLEANER_OFFSET)
        if cleaned_to is not None and cleaned_to > log_end_offset:
            write_offset(self.directory, CLEANER_OFFSET, log_end_offset)

    def stop(self) -> None:
        """Stop a :meth:`clean` running on another thread (within a batch) and wait for it;
        no plan is made or installed afterwards."""
        self._abort = True
        with self._lock:
            pass


def cleaned_path(seg: Segment) -> Path:
    return seg.log_path.with_name(seg.log_path.name + ".cleaned")


@contextmanager
def _open_read(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)
