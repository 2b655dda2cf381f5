"""The fetch pipeline (Kafka's Fetcher).

* One Fetch request per broker node carries all of that node's fetchable partitions; a node
  with a fetch in flight gets no second one.
* Partitions whose data is still buffered (queued completed fetches or the records being
  drained) are not fetched again.
* Responses are queued as completed fetches by the network thread; ``poll`` parses them on
  the user thread and drains at most ``max_poll_records``; the caller sends the next fetches
  before it returns the records (pipelining).
* A completed fetch is dropped when its partition was revoked or paused, or when its fetch
  offset no longer equals the partition's position (a seek happened meanwhile).
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import METADATA_ERRORS, OffsetOutOfRangeError, error_for
from samsa.client.future import Future
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey
from samsa.client.records import ConsumerRecord
from samsa.client.subscription import SubscriptionState
from samsa.protocol.records import decode_batches

__all__ = ["AbortedFilter", "FetchConfig", "Fetcher"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchConfig:
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    max_poll_records: int = 500
    check_crcs: bool = True
    client_rack: str | None = None
    auto_offset_reset: str = "latest"
    #: read_committed: up to the last stable offset, aborted transactions left out
    read_committed: bool = False


@dataclass
class _Completed:
    tp: TopicPartition
    fetch_offset: int
    error: int
    high_watermark: int
    data: bytes | None
    #: (producer id, first offset) of the aborted transactions (read_committed)
    aborted: tuple[tuple[int, int], ...] = ()


class BatchView(Protocol):
    """The header fields :class:`AbortedFilter` reads (a decoded batch or a bare header)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


class AbortedFilter:
    """Kafka's read_committed consumer: a data batch of a producer whose aborted
    transaction (from the answer's list, by first offset) is open at that point is left
    out; the producer's abort marker closes it. One per fetch answer, called on its
    batches in order (the consumer's fetcher and the Spark source's range reader)."""

    __slots__ = ("_open", "_pending")

    def __init__(self, aborted: tuple[tuple[int, int], ...]) -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._open: set[int] = set()

    def __call__(self, batch: BatchView) -> bool:
        while self._pending and self._pending[0][1] <= batch.base_offset:
            self._open.add(self._pending.pop(0)[0])
        if not batch.is_transactional or batch.producer_id not in self._open:
            return False
        if batch.is_control:  # this producer's marker: its aborted transaction ends here
            self._open.discard(batch.producer_id)
        return True


class _PartitionRecords:
    """Parsed records of one completed fetch, drained across polls."""

    __slots__ = ("index", "next_fetch_offset", "position", "records", "tp")

    def __init__(self, tp: TopicPartition, position: int, records: list[ConsumerRecord],
                 next_fetch_offset: int) -> None:
        self.tp = tp
        self.position = position
        self.records = records
        self.index = 0
        self.next_fetch_offset = next_fetch_offset

    def exhausted(self) -> bool:
        return self.index >= len(self.records)


class Fetcher:
    """See module docstring. ``on_data`` is called (network thread) when data arrives."""

    def __init__(self, metadata: Metadata, subscriptions: SubscriptionState,
                 config: FetchConfig, on_data: Callable[[], None]) -> None:
        self.metadata = metadata
        self.subs = subscriptions
        self.config = config
        self.on_data = on_data
        self.completed: collections.deque[_Completed] = collections.deque()
        self.next_in_line: _PartitionRecords | None = None
        self.in_flight: set[int] = set()
        self.metadata_stale = False
        self._lock = threading.Lock()

    # ---- sending ----------------------------------------------------------------------

    def buffered_partitions(self) -> set[TopicPartition]:
        out = {c.tp for c in list(self.completed)}
        if self.next_in_line is not None and not self.next_in_line.exhausted():
            out.add(self.next_in_line.tp)
        return out

    def has_completed(self) -> bool:
        return bool(self.completed) or (
            self.next_in_line is not None and not self.next_in_line.exhausted())

    def send_fetches(self) -> int:
        """Send one Fetch per node that has fetchable partitions and none in flight."""
        buffered = self.buffered_partitions()
        cluster = self.metadata.cluster
        by_node: dict[int, list[tuple[TopicPartition, int]]] = defaultdict(list)
        for tp in self.subs.fetchable():
            if tp in buffered:
                continue
            leader = cluster.leader(tp)
            if leader is None:
                self.metadata_stale = True
                continue
            if leader in self.in_flight:
                continue
            position = self.subs.assignment[tp].position
            assert position is not None
            by_node[leader].append((tp, position))
        c = self.config
        for node, parts in by_node.items():
            topics: dict[str, list[dict[str, int]]] = defaultdict(list)
            for tp, offset in parts:
                topics[tp.topic].append({
                    "partition": tp.partition, "fetch_offset": offset,
                    "partition_max_bytes": c.max_partition_fetch_bytes,
                    "current_leader_epoch": -1, "last_fetched_epoch": -1,
                    "log_start_offset": -1})
            body = {
                "cluster_id": None, "replica_id": -1, "max_wait": c.fetch_max_wait_ms,
                "min_bytes": c.fetch_min_bytes, "max_bytes": c.fetch_max_bytes,
                "isolation_level": 1 if c.read_committed else 0, "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [], "rack_id": c.client_rack or "",
            }
            self.in_flight.add(node)
            offsets = dict(parts)
            fut = self.metadata.net.send(node, ApiKey.FETCH, body,
                                         timeout_ms=c.fetch_max_wait_ms + 30000)
            fut.add_done_callback(functools.partial(self._on_response, node=node,
                                                    offsets=offsets))
        return len(by_node)

    def _on_response(self, fut: Future[Any], *, node: int,
                     offsets: dict[TopicPartition, int]) -> None:
        """Network thread: queue one completed fetch per partition."""
        try:
            if fut.failed():
                log.debug("fetch from node %s failed: %s", node, fut.exception())
                self.metadata_stale = True
                return
            for topic in fut.value.responses:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, int(p.partition_index))
                    fetch_offset = offsets.get(tp)
                    if fetch_offset is None:
                        continue
                    aborted = tuple((int(a.producer_id), int(a.first_offset))
                                    for a in p.aborted_transactions or ())
                    self.completed.append(_Completed(tp, fetch_offset, int(p.error_code),
                                                     int(p.high_watermark), p.records,
                                                     aborted))
        finally:
            self.in_flight.discard(node)
            self.on_data()

    # ---- draining (user thread) -------------------------------------------------------

    def fetched_records(self, max_records: int) -> list[ConsumerRecord]:
        """Drain up to ``max_records`` records (see module docstring)."""
        out: list[ConsumerRecord] = []
        remaining = max_records
        while remaining > 0:
            nil = self.next_in_line
            if nil is None or nil.exhausted():
                self.next_in_line = None
                if not self.completed:
                    break
                self.next_in_line = self._parse(self.completed.popleft())
                continue
            taken = self._take(nil, remaining)
            out.extend(taken)
            remaining -= len(taken)
            if not taken:
                self.next_in_line = None
        return out

    def _valid(self, tp: TopicPartition, position: int) -> bool:
        st = self.subs.assignment.get(tp)
        return st is not None and not st.paused and st.position == position

    def _take(self, pr: _PartitionRecords, n: int) -> list[ConsumerRecord]:
        if not self._valid(pr.tp, pr.position):
            pr.index = len(pr.records)
            return []
        chunk = pr.records[pr.index : pr.index + n]
        pr.index += len(chunk)
        st = self.subs.assignment[pr.tp]
        if pr.exhausted():
            st.position = pr.next_fetch_offset
        else:
            st.position = chunk[-1].offset + 1
        pr.position = st.position
        return chunk

    def _parse(self, c: _Completed) -> _PartitionRecords | None:
        tp = c.tp
        if not self._valid(tp, c.fetch_offset):
            return None
        st = self.subs.assignment[tp]
        if c.error == ErrorCode.none:
            st.high_watermark = c.high_watermark
            if not c.data:
                return None
            records: list[ConsumerRecord] = []
            next_offset = c.fetch_offset
            topic, partition, fetch_offset = tp.topic, tp.partition, c.fetch_offset
            make = ConsumerRecord
            skip = AbortedFilter(c.aborted)
            for batch in decode_batches(c.data, check_crc=self.config.check_crcs):
                if batch.next_offset > next_offset:
                    next_offset = batch.next_offset
                if skip(batch) or batch.is_control:
                    continue
                tst = batch.timestamp_type
                if batch.base_offset >= fetch_offset:
                    records.extend([make(topic, partition, o, ts, tst, k, v, h)
                                    for o, ts, k, v, h in batch.records])
                else:
                    records.extend([make(topic, partition, o, ts, tst, k, v, h)
                                    for o, ts, k, v, h in batch.records if o >= fetch_offset])
            if not records:
                if next_offset > c.fetch_offset:
                    st.position = next_offset  # only control records or compacted gaps
                return None
            return _PartitionRecords(tp, c.fetch_offset, records, next_offset)
        if c.error == ErrorCode.offset_out_of_range:
            strategy = self.config.auto_offset_reset
            if strategy not in ("earliest", "latest"):
                raise OffsetOutOfRangeError(f"fetch offset {c.fetch_offset} of {tp} is out "
                                            "of range and auto_offset_reset is none")
            st.position = None
            st.reset = strategy
            return None
        if c.error in METADATA_ERRORS:
            self.metadata_stale = True
            return None
        err = error_for(c.error, f"fetch {tp}")
        if err.retriable:
            return None
        raise err

    def clear(self, partitions: set[TopicPartition] | None = None) -> None:
        """Forget buffered data (all, or of ``partitions``)."""
        if partitions is None:
            self.completed.clear()
            self.next_in_line = None
            return
        kept = [c for c in self.completed if c.tp not in partitions]
        self.completed.clear()
        self.completed.extend(kept)
        if self.next_in_line is not None and self.next_in_line.tp in partitions:
            self.next_in_line = None

