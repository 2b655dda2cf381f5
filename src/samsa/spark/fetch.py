"""Read one partition's offset range ``[start, until)`` on an executor.

Fetch requests go to the partition leader through the samsa client's network thread; the
next fetch is sent as soon as a response's last batch is known (before its records are
decoded), so the broker works while Python decodes. Offsets below the log start (deleted by
retention) are data loss: with ``failOnDataLoss`` the task fails with a clear message,
otherwise the lost offsets are skipped and logged. ``read_committed`` fetches with that
isolation level and drops the batches of aborted transactions from each answer before it
is decoded (the gaps they leave, like control batches', are no data loss).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import METADATA_ERRORS, KafkaError, error_for
from samsa.client.fetcher import AbortedFilter
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey, NetworkClient
from samsa.client.offsets import EARLIEST, list_offsets
from samsa.client.security import DEFAULTS, client_security
from samsa.protocol.batch import BATCH_OVERHEAD, parse_header
from samsa.spark.arrow import Columns, decode_into, scan_next_offset
from samsa.spark.columnar import decode_chunk

__all__ = ["DataLossError", "RangeReader", "data_loss", "drop_aborted"]

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted or recreated topic)."""


def data_loss(message: str, fail: bool) -> None:
    """Raise :class:`DataLossError` (``failOnDataLoss=true``) or log a warning."""
    hint = ("Some data may have been lost because it is no longer available in the topic "
            "(retention, or the topic was deleted or recreated).")
    if fail:
        raise DataLossError(f"{message}. {hint} If you want the query to continue, set the "
                            "option failOnDataLoss to false.")
    log.warning("%s. %s Continuing because failOnDataLoss is false.", message, hint)


def drop_aborted(data: bytes | memoryview, aborted: Iterable[Any]) -> bytes:
    """``data`` without the batches of the aborted transactions a read_committed Fetch
    answer lists (``producer_id``, ``first_offset``); a trailing partial batch stays."""
    skip = AbortedFilter(tuple((int(a.producer_id), int(a.first_offset)) for a in aborted))
    mv = memoryview(data)
    kept: list[memoryview] = []
    pos = 0
    while len(mv) - pos >= BATCH_OVERHEAD:
        header = parse_header(mv, pos)
        if header.end > len(mv):
            break
        if not skip(header):
            kept.append(mv[pos:header.end])
        pos = header.end
    kept.append(mv[pos:])
    return b"".join(kept)


class RangeReader:
    """Fetches ranges of partitions from one cluster (one per task; close it after use)."""

    def __init__(self, bootstrap: str, *, fetch_max_bytes: int = 8 << 20,
                 request_timeout_ms: int = 30000,
                 security: Mapping[str, Any] | None = None,
                 read_committed: bool = False) -> None:
        """``security``: TLS and SASL settings (:data:`samsa.client.security.DEFAULTS`)."""
        self.read_committed = read_committed
        self.net = NetworkClient(f"samsa-spark-{os.getpid()}-{next(_ids)}", request_timeout_ms,
                                 security=client_security({**DEFAULTS, **(security or {})}))
        self.metadata = Metadata(self.net, bootstrap)
        self.fetch_max_bytes = fetch_max_bytes
        self.timeout = request_timeout_ms / 1000

    def close(self) -> None:
        self.net.close()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _leader(self, tp: TopicPartition, refresh: bool = False) -> int:
        deadline = time.monotonic() + self.timeout
        while True:
            leader = None if refresh else self.metadata.cluster.leader(tp)
            if leader is not None:
                return leader
            cluster = self.metadata.refresh({tp.topic}, self.timeout, allow_auto_create=False)
            leader = cluster.leader(tp)
            if leader is not None:
                return leader
            if time.monotonic() > deadline:
                raise KafkaError(f"no leader for {tp.topic}-{tp.partition} (does it exist?)")
            refresh = False
            time.sleep(0.1)

    def _send(self, tp: TopicPartition, offset: int, node: int) -> Any:
        body = {
            "cluster_id": None, "replica_id": -1, "max_wait": 0, "min_bytes": 0,
            "max_bytes": self.fetch_max_bytes,
            "isolation_level": 1 if self.read_committed else 0, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": tp.topic, "partitions": [{
                "partition": tp.partition, "fetch_offset": offset,
                "partition_max_bytes": self.fetch_max_bytes, "current_leader_epoch": -1,
                "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        }
        return self.net.send(node, ApiKey.FETCH, body, timeout_ms=self.timeout * 1000)

    def earliest(self, tp: TopicPartition) -> int:
        self._leader(tp)
        return list_offsets(self.metadata, {tp: EARLIEST}, self.timeout)[tp][0]

    def chunks(self, tp: TopicPartition, start: int, until: int, *,
               fail_on_data_loss: bool) -> Iterator[tuple[bytes, int, int]]:
        """Yield ``(record set, position, next position)`` covering ``[start, until)``.

        A failed fetch (the leader died, hung or moved) refreshes the leader and retries; the
        task fails after ``timeout`` of retries without progress. That clock starts at the
        first failure, not at the last progress: a fetch that timed out, or a consumer that
        held the generator longer than ``timeout``, still gets a retry at the new leader.
        """
        pos = start
        node = self._leader(tp)
        fut = self._send(tp, pos, node)
        deadline: float | None = None  # set by the first failure since the last progress
        while pos < until:
            try:
                resp = fut.result(self.timeout + 1)
                p = resp.responses[0].partitions[0]
                code = int(p.error_code)
            except KafkaError as exc:
                code, p = ErrorCode.unknown_server_error, None  # no answer: find the leader
                log.info("fetch %s-%s at %d failed: %s", tp.topic, tp.partition, pos, exc)
            if code == ErrorCode.none and p is not None:
                data = p.records or b""
                nxt = scan_next_offset(data)
                if nxt is not None and nxt > pos:
                    if nxt < until:
                        fut = self._send(tp, nxt, node)  # pipelined: decode meanwhile
                    if p.aborted_transactions:
                        data = drop_aborted(data, p.aborted_transactions)
                    yield data, pos, nxt
                    pos = nxt
                    deadline = None
                    continue
                if int(p.high_watermark) <= pos:
                    data_loss(f"{tp.topic}-{tp.partition} ends at offset {p.high_watermark} "
                              f"but the range [{start}, {until}) was planned", fail_on_data_loss)
                    return
            elif code == ErrorCode.offset_out_of_range:
                log_start = int(p.log_start_offset) if p is not None else -1
                if log_start < 0:
                    log_start = self.earliest(tp)
                if log_start <= pos:  # beyond the end: the log was truncated
                    data_loss(f"offset {pos} of {tp.topic}-{tp.partition} is out of range "
                              f"(log start {log_start})", fail_on_data_loss)
                    return
                data_loss(f"offsets [{pos}, {min(log_start, until)}) of "
                          f"{tp.topic}-{tp.partition} were deleted (log start offset is now "
                          f"{log_start})", fail_on_data_loss)
                pos = log_start
                if pos >= until:
                    return
            elif code in METADATA_ERRORS or code == ErrorCode.unknown_server_error:
                node = self._leader(tp, refresh=True)
            else:
                err = error_for(code, f"fetch {tp.topic}-{tp.partition}")
                if not err.retriable:
                    raise err
            if deadline is None:
                deadline = time.monotonic() + self.timeout
            elif time.monotonic() > deadline:
                raise KafkaError(f"fetching {tp.topic}-{tp.partition} at offset {pos} made no "
                                 f"progress for {self.timeout:.0f}s")
            time.sleep(0.05)
            fut = self._send(tp, pos, node)

    def batches(self, tp: TopicPartition, start: int, until: int, *, fail_on_data_loss: bool,
                include_headers: bool, batch_records: int,
                arrow: bool = True) -> Iterator[pa.RecordBatch | tuple[Any, ...]]:
        """Arrow batches of at most ``batch_records`` rows (or row tuples) of the records in
        ``[start, until)``.

        The same range always gives the same rows.
        """
        chunks = self.chunks(tp, start, until, fail_on_data_loss=fail_on_data_loss)
        if arrow:  # each fetch response decoded at once, handed over in slices
            for data, pos, _ in chunks:
                batch, _ = decode_chunk(data, pos, until, tp.topic, tp.partition,
                                        include_headers)
                if batch is not None:
                    for lo in range(0, batch.num_rows, batch_records):
                        yield batch.slice(lo, batch_records)
            return
        cols = Columns(tp.topic, tp.partition, include_headers)
        for data, pos, _ in chunks:
            decode_into(cols, data, pos, until)
            if len(cols) >= batch_records:
                yield from cols.rows()
        yield from cols.rows()
