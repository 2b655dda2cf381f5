"""A bulk idempotent producer for the Spark writer (one per task).

``samsa.Producer`` handles one record per call (a future, a lock and a batch lookup each);
the writer already holds whole Arrow batches, so this producer partitions rows the way the
client does (explicit partition, murmur2 of the key, or sticky for unkeyed rows), encodes
one v2 batch per partition chunk (``protocol.records.encode_batch``) and sends them in
*waves*: one Produce request per leader carrying at most one batch per partition.

Idempotence (KIP-98), shared with ``samsa.Producer`` (``init_producer_id``, ``Sequences``):
the producer id and per-partition sequence numbers are set when a batch is encoded; a
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from samsa.client.partitioner import partition_for_key
from samsa.client.producer import RECORD_OVERHEAD, Sequences, init_producer_id
from samsa.client.security import DEFAULTS, client_security
from samsa.protocol.records import COMPRESSION_CODES, RecordTuple, encode_batch

__all__ = ["BulkProducer"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)

_NONE = int(ErrorCode.none)
_DUPLICATE_SEQUENCE = int(ErrorCode.duplicate_sequence_number)
Header = tuple[str, bytes | None]


@dataclass
class _Encoded:
    tp: TopicPartition
    data: bytes
    records: int
    attempts: int = 0
    first_sent: float = 0.0


@dataclass
class _Open:
    records: list[RecordTuple] = field(default_factory=list)
    size: int = 0


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
        self._open: dict[str, dict[int, _Open]] = {}
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

    def send_rows(self, topics: Sequence[str | None], keys: Sequence[bytes | None],
                  values: Sequence[bytes | None], partitions: Sequence[int | None],
                  headers: Sequence[Sequence[Header] | None]) -> None:
        """Queue rows (columns of equal length); sends waves as batches fill up."""
        now = int(time.time() * 1000)
        counts: dict[str, int] = {}
        opened = self._open
        limit = self.batch_size
        for topic, key, value, part, hdrs in zip(topics, keys, values, partitions, headers,
                                                 strict=True):
            if topic is None:
                raise ValueError("samsa sink: a row has a null topic and no topic option")
            count = counts.get(topic)
            if count is None:
                count = counts[topic] = self._partition_count(topic)
            if part is None:
                if key is not None:
                    part = partition_for_key(key, count)
                else:
                    part = self._sticky.get(topic)
                    if part is None or part >= count:
                        part = self._sticky[topic] = random.randrange(count)
            elif not 0 <= part < count:
                raise KafkaError(f"partition {part} of {topic} does not exist",
                                 ErrorCode.unknown_topic_or_partition)
            by_part = opened.get(topic)
            if by_part is None:
                by_part = opened[topic] = {}
            batch = by_part.get(part)
            if batch is None:
                batch = by_part[part] = _Open()
            size = (len(key) if key else 0) + (len(value) if value else 0) + RECORD_OVERHEAD
            if hdrs:
                size += sum(len(k) + len(v or b"") + 2 for k, v in hdrs)
            if batch.records and batch.size + size > limit:
                self._close_batch(TopicPartition(topic, part), batch)
                if key is None and self._sticky.get(topic) == part and count > 1:
                    self._sticky[topic] = (part + 1) % count  # the next one fills elsewhere
                batch = by_part[part] = _Open()
            batch.records.append((now, key, value, hdrs or ()))
            batch.size += size
            if self._queued_bytes > self.max_queued_bytes:
                self._send_wave()

    def _close_batch(self, tp: TopicPartition, batch: _Open) -> None:
        n = len(batch.records)
        seq = self._sequences.take(tp, n) if self.producer_id >= 0 else -1
        data = encode_batch(batch.records, compression=self.compression,
                            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                            base_sequence=seq)
        self._ready.setdefault(tp, collections.deque()).append(
            _Encoded(tp, data, n))
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
        for topic, by_part in self._open.items():
            for part, batch in by_part.items():
                if batch.records:
                    self._close_batch(TopicPartition(topic, part), batch)
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
