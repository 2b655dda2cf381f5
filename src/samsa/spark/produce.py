"""A bulk idempotent producer for the Spark writer (one per task).

``samsa.Producer`` handles one record per call (a future, a lock and a batch lookup each);
the writer already holds whole Arrow batches, so this producer partitions their rows the
way the client does (explicit partition, murmur2 of the key, or sticky for unkeyed rows)
with numpy, encodes each partition's rows straight from the Arrow buffers into the records
section of a v2 batch (:mod:`samsa.spark.batches`, in C when the extension is built) and
sends the batches in *waves*: one Produce request per leader carrying at most one batch per
partition.

Idempotence (KIP-98), shared with ``samsa.Producer`` (``init_producer_id``, ``Sequences``):
the producer id and per-partition sequence numbers are set when a batch is closed; a
failed or timed-out wave is re-sent with the same bytes, and the broker answers a batch it
already stored as a duplicate (success, no second copy). With only one batch per partition
in flight, order is kept without more bookkeeping. acks=all; any non-retriable error fails
the task.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import (
    AuthorizationError,
    KafkaError,
    KafkaTimeoutError,
    TopicAuthorizationError,
    error_for,
)
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey, NetworkClient
from samsa.client.producer import RECORD_OVERHEAD, Sequences, init_producer_id
from samsa.client.security import DEFAULTS, client_security
from samsa.protocol.records import COMPRESSION_CODES, RecordTuple, encode_batch
from samsa.spark.batches import (
    Binary,
    Headers,
    binary_column,
    encode_records,
    frame,
    header_column,
    key_partitions,
    native,
)

__all__ = ["BulkProducer"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)

_NONE = int(ErrorCode.none)
_DUPLICATE_SEQUENCE = int(ErrorCode.duplicate_sequence_number)


@dataclass
class _Encoded:
    tp: TopicPartition
    data: bytes
    records: int
    attempts: int = 0
    first_sent: float = 0.0


@dataclass
class _Columns:
    """The Arrow columns of one :meth:`BulkProducer.send_columns` call and their buffers."""

    keys: pa.Array | None
    values: pa.Array
    headers: pa.Array | None
    key_buffers: Binary
    value_buffers: Binary
    header_buffers: Headers | None

    def encode(self, rows: np.ndarray[Any, Any], first_delta: int, ts_delta: int) -> bytes:
        """The records section of ``rows`` (C extension)."""
        return encode_records(rows, first_delta, ts_delta, self.key_buffers,
                              self.value_buffers, self.header_buffers)

    def records(self, rows: np.ndarray[Any, Any], ts: int) -> list[RecordTuple]:
        """``rows`` as the client's record tuples (for ``encode_batch``)."""
        idx = pa.array(rows)
        n = len(rows)
        keys = [None] * n if self.keys is None else self.keys.take(idx).to_pylist()
        headers = [None] * n if self.headers is None else self.headers.take(idx).to_pylist()
        return [(ts, _utf8(k), _utf8(v), [(h["key"] or "", _utf8(h["value"])) for h in hs]
                 if hs else ()) for k, v, hs in zip(keys, self.values.take(idx).to_pylist(),
                                                    headers, strict=True)]


def _utf8(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


@dataclass
class _Open:
    """A batch being filled: chunks of rows (columns, row indexes, timestamp)."""

    chunks: list[tuple[_Columns, np.ndarray[Any, Any], int]] = field(default_factory=list)
    count: int = 0
    size: int = 0
    base_ts: int = 0
    max_ts: int = 0


class BulkProducer:
    """See module docstring. Not thread-safe; :meth:`close` flushes."""

    def __init__(self, bootstrap: str, *, batch_size: int = 262144,
                 compression: str | None = None, request_timeout_ms: int = 30000,
                 delivery_timeout_ms: int = 120000, max_queued_bytes: int = 32 << 20,
                 security: Mapping[str, Any] | None = None) -> None:
        self.net = NetworkClient(f"samsa-spark-writer-{os.getpid()}-{next(_ids)}",
                                 request_timeout_ms,
                                 security=client_security({**DEFAULTS, **(security or {})}))
        self.metadata = Metadata(self.net, bootstrap)
        self.batch_size = batch_size
        self.compression = COMPRESSION_CODES[compression or "none"]
        self.timeout_ms = request_timeout_ms
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.max_queued_bytes = max_queued_bytes
        self.records_sent = 0
        self._open: dict[TopicPartition, _Open] = {}
        self._ready: dict[TopicPartition, collections.deque[_Encoded]] = {}
        self._queued_bytes = 0
        self._sequences = Sequences()
        self._sticky: dict[str, int] = {}
        self._wave: list[tuple[Any, list[_Encoded]]] = []
        self.producer_id, self.producer_epoch = self._init_producer_id()

    # ---- setup ------------------------------------------------------------------------

    def _init_producer_id(self) -> tuple[int, int]:
        """Producer id and epoch, or ``(-1, -1)`` to write without idempotence."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                got = init_producer_id(self.net, self.metadata.any_node(), self.timeout_ms)
                return (-1, -1) if got is None else got
            except AuthorizationError:
                raise  # no retry grants it
            except KafkaError as exc:
                if time.monotonic() > deadline:
                    raise KafkaTimeoutError(f"InitProducerId failed: {exc}") from exc
            time.sleep(0.1)

    def _partition_count(self, topic: str) -> int:
        count = self.metadata.cluster.partition_count(topic)
        deadline = time.monotonic() + self.timeout_ms / 1000
        while not count:
            cluster = self.metadata.refresh({topic}, self.timeout_ms / 1000)
            count = cluster.partition_count(topic)
            if not count:
                if cluster.unauthorized((topic,)):
                    raise TopicAuthorizationError.of((topic,))
                if time.monotonic() > deadline:
                    raise KafkaTimeoutError(f"topic {topic} not available")
                time.sleep(0.1)
        return count

    # ---- adding records ---------------------------------------------------------------

    def send_columns(self, topic: str, keys: pa.Array | None, values: pa.Array,
                     partitions: pa.Array | None, headers: pa.Array | None) -> None:
        """Queue the rows of Arrow columns for ``topic``; sends waves as batches fill up.

        ``keys`` and ``values`` are binary or string, ``partitions`` int32 and ``headers``
        ``array<struct<key: string, value: binary or string>>`` (None: no such column).
        """
        n = len(values)
        if n == 0:
            return
        now = int(time.time() * 1000)
        count = self._partition_count(topic)
        kcol, vcol = binary_column(keys, n), binary_column(values, n)
        hcol = header_column(headers)
        cols = _Columns(keys, values, headers if hcol is not None else None, kcol, vcol, hcol)
        sizes = kcol.lengths() + vcol.lengths() + RECORD_OVERHEAD
        if hcol is not None:
            sizes += hcol.sizes()
        part = np.full(n, -1, np.int32)
        if partitions is not None and partitions.null_count < n:
            part = np.asarray(partitions.fill_null(-1).to_numpy(zero_copy_only=False),
                              np.int32)
            bad = np.flatnonzero((part >= count) | (part < -1))
            if len(bad):
                raise KafkaError(f"partition {part[bad[0]]} of {topic} does not exist",
                                 ErrorCode.unknown_topic_or_partition)
        free = part < 0
        if free.any():
            by_key = key_partitions(kcol, count)
            part = np.where(free, by_key, part)
            unkeyed = np.flatnonzero(part < 0)
            if len(unkeyed):
                self._stick(topic, count, part, unkeyed, sizes)
        order = np.argsort(part, kind="stable")  # rows by partition, in row order
        cuts = np.flatnonzero(np.diff(part[order])) + 1
        for rows in np.split(order, cuts):
            self._append(TopicPartition(topic, int(part[rows[0]])), rows, sizes, now, cols)
            if self._queued_bytes > self.max_queued_bytes:
                self._send_wave()

    def _stick(self, topic: str, count: int, part: np.ndarray[Any, Any],
               rows: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any]) -> None:
        """Put unkeyed ``rows`` on the topic's sticky partition until its open batch would
        be full, then on the next partition (KIP-480's sticky partitioner)."""
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= count:
            sticky = random.randrange(count)
        csum = np.cumsum(sizes[rows])
        i = 0
        while i < len(rows):
            open_ = self._open.get(TopicPartition(topic, sticky))
            used = open_.size if open_ is not None else 0
            before = int(csum[i - 1]) if i else 0
            k = int(np.searchsorted(csum[i:], before + self.batch_size - used, "right"))
            if k == 0 and not used:
                k = 1  # a record larger than a batch gets a batch of its own
            part[rows[i : i + k]] = sticky
            i += k
            if i < len(rows) and count > 1:
                sticky = (sticky + 1) % count  # that batch is full: the next fills elsewhere
        self._sticky[topic] = sticky

    def _append(self, tp: TopicPartition, rows: np.ndarray[Any, Any],
                sizes: np.ndarray[Any, Any], now: int, cols: _Columns) -> None:
        """Add ``rows`` to ``tp``'s open batch, closing it whenever it is full."""
        csum = np.cumsum(sizes[rows])
        i = 0
        while i < len(rows):
            batch = self._open.get(tp)
            if batch is None:
                batch = self._open[tp] = _Open(base_ts=now, max_ts=now)
            before = int(csum[i - 1]) if i else 0
            k = int(np.searchsorted(csum[i:], before + self.batch_size - batch.size, "right"))
            if k == 0:
                if batch.count:
                    self._close_batch(tp, self._open.pop(tp))
                    continue
                k = 1  # a record larger than a batch gets a batch of its own
            batch.chunks.append((cols, rows[i : i + k], now))
            batch.count += k
            batch.size += int(csum[i + k - 1]) - before
            batch.max_ts = max(batch.max_ts, now)
            i += k
            if i < len(rows):
                self._close_batch(tp, self._open.pop(tp))

    def _close_batch(self, tp: TopicPartition, batch: _Open) -> None:
        """Encode the batch (C extension, or the client's ``encode_batch``) and queue it."""
        n = batch.count
        seq = self._sequences.take(tp, n) if self.producer_id >= 0 else -1
        pid, epoch = self.producer_id, self.producer_epoch
        if native():
            parts, delta = [], 0
            for cols, rows, ts in batch.chunks:
                parts.append(cols.encode(rows, delta, ts - batch.base_ts))
                delta += len(rows)
            data = frame(b"".join(parts), n, batch.base_ts, batch.max_ts,
                         compression=self.compression, producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq)
        else:
            data = encode_batch([r for cols, rows, ts in batch.chunks
                                 for r in cols.records(rows, ts)],
                                compression=self.compression, producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq)
        self._ready.setdefault(tp, collections.deque()).append(_Encoded(tp, data, n))
        self._queued_bytes += len(data)
        self.pump()

    def pump(self) -> None:
        """Send the next wave if none is in flight any more (never blocks on the broker)."""
        if all(fut.done() for fut, _ in self._wave) and any(self._ready.values()):
            self._send_wave()

    # ---- sending ----------------------------------------------------------------------

    def _send_wave(self) -> None:
        """Wait for the wave in flight, then send the next one (one batch per partition)."""
        self._await_wave()
        by_node: dict[int, list[_Encoded]] = collections.defaultdict(list)
        cluster = self.metadata.cluster
        stale = False
        for tp, queue in self._ready.items():
            if queue:
                leader = cluster.leader(tp)
                if leader is None:
                    stale = True
                else:
                    by_node[leader].append(queue[0])
        if stale:
            self.metadata.refresh({tp.topic for tp in self._ready}, self.timeout_ms / 1000)
        for node, batches in by_node.items():
            topics: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
            for b in batches:
                b.attempts += 1
                if b.attempts == 1:
                    b.first_sent = time.monotonic()
                topics[b.tp.topic].append({"index": b.tp.partition, "records": b.data})
            body = {"transactional_id": None, "acks": -1, "timeout": self.timeout_ms,
                    "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}
            self._wave.append((self.net.send(node, ApiKey.PRODUCE, body,
                                             timeout_ms=self.timeout_ms), batches))

    def _await_wave(self) -> None:
        wave, self._wave = self._wave, []
        retry = False
        for fut, batches in wave:
            try:
                resp = fut.result(self.timeout_ms / 1000 + 5)
            except KafkaError as exc:
                log.info("produce request failed, resending its batches: %s", exc)
                retry = True
                self._check_deadline(batches, exc)
                continue
            codes = {TopicPartition(t.name, int(p.index)): int(p.error_code)
                     for t in resp.responses for p in t.partition_responses}
            for b in batches:
                code = codes.get(b.tp, ErrorCode.network_exception)
                if code in (_NONE, _DUPLICATE_SEQUENCE):
                    self._ready[b.tp].popleft()
                    self._queued_bytes -= len(b.data)
                    self.records_sent += b.records
                    continue
                err = error_for(code, f"produce to {b.tp.topic}-{b.tp.partition}")
                if not err.retriable:
                    raise err
                retry = True
                self._check_deadline([b], err)
        if retry:
            time.sleep(0.2)
            self.metadata.refresh({tp.topic for tp in self._ready}, self.timeout_ms / 1000)

    def _check_deadline(self, batches: list[_Encoded], exc: BaseException) -> None:
        """Give up on a batch ``delivery.timeout.ms`` after its first attempt."""
        now = time.monotonic()
        for b in batches:
            if now - b.first_sent > self.delivery_timeout:
                raise KafkaTimeoutError(
                    f"records for {b.tp.topic}-{b.tp.partition} not delivered in "
                    f"{self.delivery_timeout:.0f}s ({b.attempts} attempts): {exc}")

    def flush(self) -> None:
        """Encode the open batches and send until every batch is acknowledged."""
        for tp, batch in self._open.items():
            self._close_batch(tp, batch)
        self._open.clear()
        while any(self._ready.values()) or self._wave:
            self._send_wave()
            self._await_wave()

    def close(self) -> None:
        self.net.close()

    def __enter__(self) -> BulkProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
