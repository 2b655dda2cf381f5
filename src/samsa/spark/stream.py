"""Structured Streaming reader (``spark.readStream.format("samsa")``).

Offsets are ``{"topic": {"partition": next offset}}``. Each micro-batch reads, per
partition, ``[previous end, new end)``; partitions that appear while the query runs (new
partitions, new topics matching a pattern) start at their earliest offset. Admission
control: ``maxOffsetsPerTrigger`` (or the engine's ``ReadMaxRows``) caps a micro-batch;
``Trigger.AvailableNow`` stops at the offsets that were latest when the query started.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from samsa import TopicPartition
from samsa.spark.cluster import Cluster
from samsa.spark.fetch import RangeReader, data_loss
from samsa.spark.options import (
    EARLIEST,
    SourceOptions,
    client_settings,
    offsets_from_json,
    offsets_to_json,
)
from samsa.spark.planning import OffsetRange, plan_ranges, rate_limit
from samsa.spark.worker import freeze_imports

__all__ = ["SamsaStreamReader", "read_range"]

log = logging.getLogger(__name__)

Offsets = dict[str, dict[str, int]]


def read_range(opts: SourceOptions, r: OffsetRange) -> Iterator[Any]:
    """Arrow batches of one planned range (executor side; same range, same rows)."""
    freeze_imports()
    with RangeReader(opts.bootstrap, fetch_max_bytes=opts.fetch_max_bytes,
                     request_timeout_ms=opts.request_timeout_ms,
                     security=client_settings(opts.security),
                     read_committed=opts.read_committed) as reader:
        yield from reader.batches(r.tp, r.start, r.until,
                                  fail_on_data_loss=opts.fail_on_data_loss,
                                  include_headers=opts.include_headers,
                                  batch_records=opts.batch_records, arrow=opts.arrow)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See module docstring. Lives in Spark's driver-side Python runner between calls."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._cluster: Cluster | None = None
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._committed: dict[TopicPartition, int] | None = None
        self._last_trigger: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_cluster": None, "_target": None, "_latest": None,
                "_committed": None, "_last_trigger": None}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.opts)
        return self._cluster

    # ---- offsets (driver) ----------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        tps = self.cluster.partitions()
        return offsets_to_json(self.cluster.resolve(self.opts.starting, tps, "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` (``minOffsetsPerTrigger`` is applied by the source)."""
        n = self.opts.max_offsets_per_trigger
        if n is not None:
            return ReadMaxRows(n)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.cluster.offsets(self.cluster.partitions(), -1)
        log.info("availableNow: reading up to %s", offsets_to_json(self._target))

    def _with_new_partitions(self, start: dict[TopicPartition, int],
                             current: set[TopicPartition]) -> dict[TopicPartition, int]:
        """``start`` plus partitions discovered since, at their earliest offsets."""
        new = current - set(start)
        if not new:
            return start
        earliest = self.cluster.offsets(new, EARLIEST)
        log.info("new partitions %s start at earliest", offsets_to_json(earliest))
        return {**start, **earliest}

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        begin = offsets_from_json(start)
        self._commit_group(begin)
        existing = self.cluster.partitions()
        current = existing if self._target is None else existing & set(self._target)
        begin = self._with_new_partitions(begin, current)
        latest = self.cluster.offsets(current, -1)
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items()}
        self._latest = latest
        # Partitions gone from the cluster are left out of the end; partitions() reports it.
        end = {tp: latest.get(tp, off) for tp, off in begin.items() if tp in existing}
        end.update({tp: off for tp, off in latest.items() if tp not in end})
        for tp, off in end.items():
            if off < begin[tp]:  # truncated or recreated: partitions() reports the loss
                end[tp] = begin[tp] if self._target is not None else off
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        min_rows = None  # ReadAllAvailable: the engine overrides the options
        if isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        elif isinstance(limit, ReadMaxRows):
            min_rows = self.opts.min_offsets_per_trigger
        if end == offsets_from_json(start) or not self._admit(begin, end, min_rows):
            return start
        return offsets_to_json(end)

    def _admit(self, begin: dict[TopicPartition, int], end: dict[TopicPartition, int],
               min_rows: int | None) -> bool:
        """``minOffsetsPerTrigger``: wait for enough records, at most ``maxTriggerDelay``.

        Ignored with ``availableNow`` (it must finish) and for new or gone partitions; the
        first trigger is never delayed (as Spark's Kafka source).
        """
        now = time.monotonic()
        last = self._last_trigger if self._last_trigger is not None else now - 1e9
        available = sum(max(0, off - begin[tp]) for tp, off in end.items())
        if (min_rows is None or self._target is not None or available >= min_rows
                or set(end) != set(begin)
                or now - last >= self.opts.max_trigger_delay_ms / 1000):
            self._last_trigger = now
            return True
        return False

    def reportLatestOffset(self) -> Offsets | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        fail = self.opts.fail_on_data_loss
        new = set(until) - set(begin)
        if new:
            begin.update(self.cluster.offsets(new, EARLIEST))
        for tp in sorted(set(begin) - set(until)):
            data_loss(f"partition {tp.topic}-{tp.partition} is gone (deleted topic?)", fail)
        for tp in sorted(until):
            if until[tp] < begin[tp]:
                data_loss(f"{tp.topic}-{tp.partition}: offset went back from {begin[tp]} to "
                          f"{until[tp]} (recreated topic?)", fail)
        return plan_ranges(begin, until, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.opts, partition)

    def commit(self, end: Offsets) -> None:
        self._commit_group(offsets_from_json(end))

    def _commit_group(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit processed offsets under ``groupId`` (for lag tools) when they moved.

        Spark calls ``commit(end)`` only when it plans the batch after, so the offsets a
        ``latestOffset`` call starts from (everything processed so far) are committed too:
        that covers the last batch of an ``availableNow`` run.
        """
        if not self.opts.group_id or offsets == self._committed:
            return
        self.cluster.commit(self.opts.group_id, offsets)
        self._committed = offsets

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
