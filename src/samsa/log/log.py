"""PartitionLog: the append-only log of one partition, as a list of segments.

Threading: every method runs on the broker's event-loop thread, except :meth:`flush`, which
a worker thread may call at any time (group commit). ``_lock`` guards the little state the
two share (log end offset, the active descriptor, descriptors of rolled segments awaiting
fsync); operations that replace the active segment (truncate, close, delete) also take
``_flush_lock`` so they never race an fsync.

Compaction is the :class:`~samsa.log.cleaner.Cleaner`'s: the log hands it its segments and
recovery point to plan, and applies what an install gives back (segments to drop).
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

from samsa.protocol.batch import BatchHeader
from samsa.protocol.records import control_type

from .append import AppendInfo, prepare
from .checkpoint import LOG_START_OFFSET, RECOVERY_POINT, fsync_dir, read_offset, write_offset
from .cleaner import NOTHING_CLEANED, Cleaner, CompactionPlan, CompactionStats
from .config import LogConfig
from .errors import OffsetOutOfRange
from .producer_state import ProducerStateManager
from .records import record_at_or_after
from .recovery import list_segments, recover_segments
from .retention import segments_to_delete
from .segment import INT32_MAX, Segment

__all__ = ["AppendInfo", "PartitionLog"]

MAX_LOADED_SEGMENTS = 2
"""Non-active segments kept open (descriptor + indexes) for reads, per partition."""
RECOVERY_POINT_INTERVAL_S = 1.0
"""Longest time the recovery-point checkpoint lags the fsyncs (see PartitionLog.flush)."""
_BASE_OFFSET = struct.Struct(">q")


class PartitionLog:
    """Segments, indexes, producer state and checkpoints of one partition directory."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config
        self.producers = ProducerStateManager()
        self._segments: list[Segment] = []
        self._loaded: OrderedDict[int, Segment] = OrderedDict()
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._flushed_offset = 0
        self._checkpointed = -1  # recovery point last written, and when (monotonic)
        self._checkpointed_at = 0.0
        self._unsynced: list[int] = []
        self._dir_dirty = False
        self._closed = False
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._cleaner = Cleaner(directory)

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> PartitionLog:
        """Open (creating or recovering) the log stored in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, config)
        log._recover(now_ms)
        return log

    def _recover(self, now_ms: int) -> None:
        interval = self.config.index_interval_bytes
        recovery_point = read_offset(self.directory, RECOVERY_POINT)
        stored_start = read_offset(self.directory, LOG_START_OFFSET)
        segments, scanned = recover_segments(
            list_segments(self.directory), recovery_point, interval
        )
        fresh = not segments
        if fresh:
            segments = [Segment.create(self.directory, max(stored_start or 0, 0))]
            self._dir_dirty = True
        active = segments[-1]
        active.load(interval)
        active.open_fd()
        active.created_ms = now_ms
        self._segments = segments
        end = active.next_offset if active.next_offset is not None else active.base_offset
        self._log_end_offset = end
        self._log_start_offset = min(max(stored_start or 0, segments[0].base_offset), end)
        if fresh:
            write_offset(self.directory, RECOVERY_POINT, end)
        elif recovery_point != end:
            # Whatever survived the scan is made durable: the recovery point becomes the end.
            for seg in scanned:
                if seg in segments and seg is not active:
                    fd = os.open(seg.log_path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            os.fsync(active.open_fd())
            fsync_dir(self.directory)
            self._dir_dirty = False
            write_offset(self.directory, RECOVERY_POINT, end)
        self._flushed_offset = self._checkpointed = end
        self._rebuild_producer_state()

    def _rebuild_producer_state(self) -> None:
        """Replay the producer fields of every batch header (record bodies are not read)."""
        self.producers.clear()
        for seg in self._segments:
            for header in seg.headers():
                if header.producer_id >= 0:
                    control = None
                    if header.is_control:  # a marker: its type is in its one small record
                        data = seg.pread(header.size, header.position)
                        control = control_type(data, replace(header, position=0))
                    self.producers.replay(header, control)
            if not seg.loaded:
                seg.close()
        self.producers.remove_before(self._log_start_offset)

    # -- properties --------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        return self._log_end_offset

    @property
    def flushed_offset(self) -> int:
        """Every offset below this one is fsynced."""
        return self._flushed_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first (read-only use: tests and tools)."""
        return list(self._segments)

    def reconfigure(self, config: LogConfig) -> None:
        """Apply new topic settings (AlterConfigs); they take effect from the next call."""
        self.config = config

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    # -- appending ---------------------------------------------------------------------
    def append(
        self, records: bytes, now_ms: int, headers: list[BatchHeader] | None = None
    ) -> AppendInfo:
        """Append whole v2 batches, assigning offsets from the log end offset.

        The checks are :func:`samsa.log.append.prepare`'s (a batch larger than
        segment.bytes too): on an error nothing is written. A retried idempotent batch is
        not written again: the result has ``duplicate=True`` and the original offsets. The
        bytes reach the OS before returning (no fsync).
        """
        self._check_open()
        prepared = prepare(records, headers, self.config, self.producers,
                           self._log_end_offset, self._log_start_offset, now_ms,
                           segment_bytes=self.config.segment_bytes)
        if isinstance(prepared, AppendInfo):
            return prepared
        self._write(prepared.buf, prepared.headers, now_ms)
        info = prepared.done(self.producers, self._log_start_offset)
        with self._lock:
            self._log_end_offset = prepared.next_offset
        return info

    def _write(
        self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], now_ms: int
    ) -> None:
        """Write batches, rolling segments as needed; one write per segment touched.

        Each batch goes out as its assigned baseOffset followed by the rest of its bytes
        in ``buf`` (a vectored write: the produced records are never copied)."""
        view = memoryview(buf)
        interval = self.config.index_interval_bytes
        pending: list[BatchHeader] = []
        for h in headers:
            if self._should_roll(h, now_ms, pending):
                self._write_chunk(view, pending, interval)
                pending = []
                self._roll(h.base_offset, now_ms)
            pending.append(h)
        self._write_chunk(view, pending, interval)

    def _write_chunk(self, view: memoryview, headers: list[BatchHeader], interval: int) -> None:
        if not headers:
            return
        seg = self._active
        position = seg.size
        parts: list[bytes | memoryview] = []
        for h in headers:
            parts.append(_BASE_OFFSET.pack(h.base_offset))
            parts.append(view[h.position + 8 : h.end])
        seg.write(parts)
        for h in headers:
            seg.note_batch(h, position, interval)
            position += h.size

    def _should_roll(self, h: BatchHeader, now_ms: int, pending: list[BatchHeader]) -> bool:
        seg = self._active
        pending_bytes = sum(p.size for p in pending)
        if seg.size + pending_bytes == 0:
            return False
        cfg = self.config
        if seg.size + pending_bytes + h.size > cfg.segment_bytes:
            return True
        index = seg.offset_index
        if index is not None and len(index) + len(pending) >= cfg.segment_index_bytes // 8:
            return True
        if h.last_offset - seg.base_offset > INT32_MAX:
            return True
        first = seg.first_batch_timestamp
        if first < 0 and pending:
            first = pending[0].max_timestamp
        if first >= 0 and h.max_timestamp >= 0:
            elapsed = h.max_timestamp - first
        elif seg.created_ms > 0:
            elapsed = now_ms - seg.created_ms
        else:
            return False
        return elapsed > cfg.segment_ms - cfg.segment_jitter_ms

    def _roll(self, base_offset: int, now_ms: int) -> None:
        old = self._active
        old.persist_indexes()
        new = Segment.create(self.directory, base_offset)
        new.created_ms = now_ms
        with self._lock:
            fd = old.take_fd()
            if fd is not None:
                self._unsynced.append(fd)
            self._segments.append(new)
            self._dir_dirty = True
        self._touch(old)

    # -- flushing ----------------------------------------------------------------------
    def flush(self, *, checkpoint: bool = False) -> int:
        """fsync everything appended so far; returns the new flushed offset.

        Safe to call from a worker thread while the loop thread appends: the fsync covers
        every write that completed before it started. The recovery-point checkpoint only
        bounds how much recovery re-validates, so it may lag: it is rewritten at most every
        ``RECOVERY_POINT_INTERVAL_S`` (a file replace per fsync costs about half as much as
        the fsync), on close, or now with ``checkpoint``.
        """
        with self._flush_lock:
            return self._flush_locked(checkpoint)

    def _flush_locked(self, checkpoint: bool = False) -> int:
        with self._lock:
            if self._closed:
                return self._flushed_offset
            target = self._log_end_offset
            fds, self._unsynced = self._unsynced, []
            active_fd = self._active.fd
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            idle = target <= self._flushed_offset and not fds and not dir_dirty
        if not idle:
            try:
                for fd in fds:
                    os.fsync(fd)
                if active_fd is not None:
                    os.fsync(active_fd)
                if dir_dirty:
                    fsync_dir(self.directory)
            finally:
                for fd in fds:
                    os.close(fd)
            with self._lock:
                if target > self._flushed_offset:
                    self._flushed_offset = target
        return self._checkpoint_locked(checkpoint)

    def _checkpoint_locked(self, force: bool) -> int:
        """Write the flushed offset as the recovery point if due (or ``force``); return it."""
        flushed = self._flushed_offset
        now = time.monotonic()
        if flushed != self._checkpointed and (
            force or now - self._checkpointed_at >= RECOVERY_POINT_INTERVAL_S
        ):
            write_offset(self.directory, RECOVERY_POINT, flushed)
            self._checkpointed, self._checkpointed_at = flushed, now
        return flushed

    # -- reading -----------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        At least one whole batch is returned when one exists at or after ``offset``, even
        if it is larger than ``max_bytes``; reads stay within one segment. ``offset`` equal
        to the log end offset gives b"", outside [log start, log end] OffsetOutOfRange.
        """
        self._check_open()
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} not in [{self._log_start_offset}, {self._log_end_offset}]"
            )
        if offset == self._log_end_offset:
            return b""
        for seg in self._segments[self._segment_index(offset) :]:
            self._touch(seg)
            data = seg.read(offset, max_bytes)
            if data:
                return data
        return b""

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1, 0)

    def _touch(self, seg: Segment) -> None:
        """Load ``seg`` and keep it among the few recently used non-active segments."""
        seg.load(self.config.index_interval_bytes)
        if seg is self._active:
            return
        self._loaded[seg.base_offset] = seg
        self._loaded.move_to_end(seg.base_offset)
        while len(self._loaded) > MAX_LOADED_SEGMENTS:
            _, old = self._loaded.popitem(last=False)
            if old is not self._active:
                old.unload()

    def _forget(self, seg: Segment) -> None:
        self._loaded.pop(seg.base_offset, None)

    # -- timestamps --------------------------------------------------------------------
    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= ``ts_ms``.

        The time index and batch max timestamps find the first batch that can hold such a
        record; its records are then decoded (decompressing if needed) to find the exact
        record. If decoding fails the batch's base offset and max timestamp are answered
        (Kafka's batch-level answer). For LogAppendTime batches every record has the batch
        max timestamp. None if no record is that recent.
        """
        self._check_open()
        for seg in self._segments[self._segment_index(self._log_start_offset) :]:
            self._touch(seg)
            if seg.max_timestamp < ts_ms or seg.time_index is None:
                continue
            start = seg.time_index.start_for(ts_ms) + seg.base_offset
            header = seg.find_position(max(start, self._log_start_offset))
            while header is not None:
                if header.max_timestamp >= ts_ms and header.next_offset > self._log_start_offset:
                    return record_at_or_after(seg.pread(header.size, header.position),
                                              header, ts_ms, self._log_start_offset)
                header = seg.header_at(header.end)
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp, or None."""
        self._check_open()
        best: Segment | None = None
        for seg in self._segments[self._segment_index(self._log_start_offset) :]:
            self._touch(seg)
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        return self.offset_for_timestamp(best.max_timestamp)

    # -- retention ---------------------------------------------------------------------
    def apply_retention(self, now_ms: int) -> int:
        """Delete whole non-active segments by retention.ms, retention.bytes and the log
        start offset; returns how many were deleted (advancing the log start offset)."""
        self._check_open()
        cfg = self.config
        old = self._segments[:-1]
        count = segments_to_delete(
            [s.size for s in old],
            [s.base_offset for s in self._segments[1:]],
            lambda i: self._segment_max_timestamp(old[i]),
            active_size=self._active.size,
            now_ms=now_ms,
            log_start_offset=self._log_start_offset,
            retention_ms=cfg.retention_ms,
            retention_bytes=cfg.retention_bytes,
            delete_policy=cfg.delete,
        )
        if count:
            self._delete_prefix(count)
        return count

    def _segment_max_timestamp(self, seg: Segment) -> int:
        if seg.next_offset is None:
            seg.load(self.config.index_interval_bytes)
            if seg.base_offset not in self._loaded:
                seg.unload()
        if seg.max_timestamp >= 0:
            return seg.max_timestamp
        return int(os.stat(seg.log_path).st_mtime * 1000)  # Kafka's fallback: mtime

    def _delete_prefix(self, count: int) -> None:
        doomed = self._segments[:count]
        new_start = max(self._log_start_offset, self._segments[count].base_offset)
        self._set_log_start(new_start)
        with self._lock:
            self._segments = self._segments[count:]
        for seg in doomed:
            self._forget(seg)
            seg.delete_files()

    def _set_log_start(self, offset: int) -> None:
        if offset != self._log_start_offset:
            self._log_start_offset = offset
            write_offset(self.directory, LOG_START_OFFSET, offset)
            self.producers.remove_before(offset)

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (DeleteRecords); returns it."""
        self._check_open()
        if offset > self._log_end_offset or offset < 0:
            raise OffsetOutOfRange(f"offset {offset} beyond log end {self._log_end_offset}")
        if offset > self._log_start_offset:
            self._set_log_start(offset)
            self.apply_retention_below_start()
        return self._log_start_offset

    def apply_retention_below_start(self) -> None:
        """Delete segments wholly below the log start offset."""
        count = 0
        while (
            count < len(self._segments) - 1
            and self._segments[count + 1].base_offset <= self._log_start_offset
        ):
            count += 1
        if count:
            self._delete_prefix(count)

    # -- compaction --------------------------------------------------------------------
    def compact(self, now_ms: int) -> CompactionStats:
        """Keep only the latest record per key in the non-active segments.

        Applies when cleanup.policy contains compact, to the leading non-active, fsynced
        segments whose max timestamp is at least min.compaction.lag.ms old, once the dirty part
        (beyond the ``cleaner-offset`` checkpoint) is at least min.cleanable.dirty.ratio of
        them. Each segment is rewritten into ``.cleaned``, fsynced and renamed over the
        original (crash-safe: a leftover ``.cleaned`` is deleted on open). See
        :mod:`samsa.log.compaction` for the per-record rules.

        This runs the three steps in one go; the broker runs :meth:`clean`, the slow one,
        on a worker thread between :meth:`plan_compaction` and :meth:`install_cleaned`.
        """
        plan = self.plan_compaction(now_ms)
        if plan is None:
            return NOTHING_CLEANED
        try:
            sizes = self.clean(plan)
        except BaseException:
            self.install_cleaned(plan, None)
            raise
        return self.install_cleaned(plan, sizes)

    def plan_compaction(self, now_ms: int) -> CompactionPlan | None:
        """Pick the segments to clean (see :meth:`compact`); None if nothing is due.

        Call from the thread that appends; until :meth:`install_cleaned` no other
        compaction of this log is planned.
        """
        self._check_open()
        if not self.config.compact or self._cleaner.busy:
            return None
        # Bring the recovery-point checkpoint up to date (the cleaner only takes segments
        # below it), unless an fsync is running: the loop must not wait for it.
        durable = self._checkpointed
        if self._flush_lock.acquire(blocking=False):
            try:
                durable = self._checkpoint_locked(force=True)
            finally:
                self._flush_lock.release()
        return self._cleaner.plan(
            self._segments, durable, self._segment_max_timestamp, self.config, now_ms,
            self.producers,
        )

    def clean(self, plan: CompactionPlan) -> list[int] | None:
        """Write the cleaned copies of the planned segments (any thread; see
        :meth:`Cleaner.clean <samsa.log.cleaner.Cleaner.clean>`); None if stopped."""
        return self._cleaner.clean(plan)

    def install_cleaned(self, plan: CompactionPlan, sizes: list[int] | None) -> CompactionStats:
        """Swap the cleaned files in for their segments (the appending thread, after clean)."""
        done = self._cleaner.install(
            plan, sizes, self._segments[:-1], self.config.index_interval_bytes
        )
        for seg in done.rewritten:
            self._forget(seg)
        if done.emptied:
            with self._lock:
                self._segments = [s for s in self._segments if s not in done.emptied]
            for seg in done.emptied:
                self._forget(seg)
                seg.delete_files()
            fsync_dir(self.directory)
        return done.stats

    # -- truncation, closing, deletion -------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (a batch is never split,
        so the new log end offset may be below ``offset``). At or below the log start
        offset the log is emptied and restarts at ``offset``."""
        self._check_open()
        with self._flush_lock:  # no fsync may run while descriptors change hands
            if offset >= self._log_end_offset:
                return
            interval = self.config.index_interval_bytes
            full = offset <= self._log_start_offset
            idx = -1 if full else self._segment_index(offset)
            keep, doomed = self._segments[: idx + 1], self._segments[idx + 1 :]
            for old in doomed:
                self._forget(old)
                old.delete_files()
            if full:
                keep = [Segment.create(self.directory, offset)]
                self._set_log_start(offset)
            else:
                seg = keep[-1]
                self._forget(seg)
                seg.load(interval)
                header = seg.find_position(offset)
                if header is not None:
                    seg.truncate(header.position)
                seg.scan(interval)
                seg.persist_indexes()
            active = keep[-1]
            active.open_fd()
            with self._lock:
                self._segments = keep
                end = active.next_offset
                self._log_end_offset = end if end is not None else active.base_offset
                self._flushed_offset = min(self._flushed_offset, self._log_end_offset)
                self._dir_dirty = True
            write_offset(self.directory, RECOVERY_POINT, self._flushed_offset)
            self._checkpointed = self._flushed_offset
            self._cleaner.truncated(self._log_end_offset)
            self._rebuild_producer_state()

    def close(self) -> None:
        """fsync, persist indexes and checkpoints, release descriptors. Idempotent.

        A :meth:`clean` running on another thread is stopped first (within a batch)."""
        self._cleaner.stop()
        with self._flush_lock:
            if self._closed:
                return
            self._flush_locked(checkpoint=True)
            self._active.persist_indexes()
            with self._lock:
                self._closed = True
            for seg in self._segments:
                seg.unload()
            self._loaded.clear()

    def delete(self) -> None:
        """Close and remove the whole partition directory (DeleteTopics)."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")
