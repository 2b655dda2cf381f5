"""``samsa.Producer``: batching, Java-compatible key partitioning, idempotent retries.

``send`` encodes a record into its partition's open batch (``protocol.records.BatchBuilder``,
in C when ``samsa._speedups`` is built) and returns a future. A sender thread drains batches
that are full, older than ``linger_ms``, or being flushed: one Produce request per broker
node with at most one batch per partition, up to ``max_in_flight_requests_per_connection``
in flight, the batches spliced into a frame encoded once per shape. With idempotence
(default) every batch carries the producer id, epoch and a per-partition sequence; a retried
batch keeps its sequence (the broker discards the duplicate of a batch it already appended)
and goes back in sequence order. Delivery callbacks and futures resolve on the network
thread.

Authorization errors are raised at once, as Kafka's producer does: ``send`` to a topic the
principal may not DESCRIBE raises :class:`~samsa.client.errors.TopicAuthorizationError`
(Metadata answered TOPIC_AUTHORIZATION_FAILED), a refused WRITE fails the batch's futures
with it, and an idempotent producer refused its producer id (CLUSTER_AUTHORIZATION_FAILED)
is fatal: every queued record and every later ``send`` fails with
:class:`~samsa.client.errors.ClusterAuthorizationError`.

With ``transactional_id`` the producer is transactional (idempotence implied, acks=all):
``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction``,
``commit_transaction`` and ``abort_transaction`` as in Kafka's producer. The state and the
coordinator requests live in the pure :class:`~samsa.client.transactions.TransactionManager`;
the sender thread sends its requests one at a time (EndTxn once every batch is done; under
transactions v1 a partition's batches wait until AddPartitionsToTxn added it), the network
thread feeds it the answers, and the user's calls wait for their operation. A fenced producer
fails every queued record and every later call with
:class:`~samsa.client.errors.ProducerFencedError`.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import (
    AuthorizationError,
    KafkaError,
    KafkaTimeoutError,
    TopicAuthorizationError,
    TransactionAbortableError,
    error_for,
)
from samsa.client.future import Future
from samsa.client.metadata import Cluster, Metadata
from samsa.client.net import ApiKey, NetworkClient
from samsa.client.partitioner import StickyPartitioner, partition_for_key
from samsa.client.records import RecordMetadata
from samsa.client.security import DEFAULTS as SECURITY_DEFAULTS
from samsa.client.security import client_security
from samsa.client.transactions import (
    ConsumerGroupMetadata,
    Operation,
    TransactionManager,
    TxnRequest,
    TxnState,
)
from samsa.protocol.batch import BATCH_OVERHEAD
from samsa.protocol.codec import placeholder
from samsa.protocol.records import COMPRESSION_CODES, BatchBuilder

__all__ = ["Producer", "RecordFuture", "Sequences", "init_producer_id"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)

DEFAULTS: dict[str, Any] = {
    **SECURITY_DEFAULTS,
    "bootstrap_servers": "localhost:9092",
    "client_id": None,
    "acks": -1,
    "linger_ms": 5,
    "batch_size": 16384,
    "compression_type": None,
    "enable_idempotence": True,
    "retries": 2**31 - 1,
    "delivery_timeout_ms": 120000,
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "reconnect_backoff_ms": 50,
    "max_in_flight_requests_per_connection": 5,
    "max_request_size": 1048576,
    "max_block_ms": 60000,
    "buffer_memory": 33554432,
    "metadata_max_age_ms": 300000,
    "key_serializer": None,
    "value_serializer": None,
    "partitioner": None,
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
}

# plain ints: compared per batch on the I/O thread
_NONE = int(ErrorCode.none)
_DUPLICATE_SEQUENCE = int(ErrorCode.duplicate_sequence_number)
_OUT_OF_ORDER_SEQUENCE = int(ErrorCode.out_of_order_sequence_number)
_NETWORK_EXCEPTION = int(ErrorCode.network_exception)
#: produce errors after which metadata is refreshed before the retry
_REFRESH_METADATA = frozenset({int(ErrorCode.unknown_topic_or_partition),
                               int(ErrorCode.leader_not_available),
                               int(ErrorCode.not_leader_or_follower)})
TV2_PRODUCE_VERSION = 12
"""Produce from this version adds a transactional producer's partitions (KIP-890)."""
#: bytes counted per record beside its key and value (buffer and batch accounting)
RECORD_OVERHEAD = 16


class _Batch(BatchBuilder):
    """Records of one partition sent together, encoded as they are added; one event for
    all their futures. ``closed`` once full or taken by the sender: no record joins it."""

    __slots__ = ("attempts", "base_sequence", "callbacks", "closed", "created", "encoded",
                 "error", "event", "metadata", "retry_at", "size", "tp")

    def __init__(self, tp: TopicPartition, created: float) -> None:
        super().__init__()
        self.tp = tp
        self.created = created
        self.size = BATCH_OVERHEAD
        self.attempts = 0
        self.base_sequence = -1
        self.retry_at = 0.0
        self.encoded: bytes | None = None
        self.closed = False
        self.event = threading.Event()
        self.error: BaseException | None = None
        self.metadata: tuple[int, int] | None = None
        self.callbacks: list[tuple[int, Callable[[Any], None], Any]] = []

    def done(self, base_offset: int, log_append_time: int) -> None:
        self.metadata = (base_offset, log_append_time)
        self._finish()

    def fail(self, exc: BaseException) -> None:
        self.error = exc
        self._finish()

    def _finish(self) -> None:
        self.event.set()
        for _, cb, fut in self.callbacks:
            try:
                cb(fut)
            except Exception:
                log.exception("delivery callback failed")
        self.callbacks = []

    def record_metadata(self, index: int) -> RecordMetadata:
        assert self.metadata is not None
        base, log_append_time = self.metadata
        ts = log_append_time if log_append_time > 0 else self.timestamp(index)
        return RecordMetadata(self.tp.topic, self.tp.partition,
                              base + index if base >= 0 else -1, ts)


class _PyRecordRef:
    """``(batch, index)``: the pure-Python twin of ``samsa._speedups.RecordRef``."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch = batch
        self._index = index


if TYPE_CHECKING:
    _RecordRef = _PyRecordRef
else:
    try:  # built in C, a future costs a few hundred instructions instead of ~2,000
        from samsa._speedups import RecordRef as _RecordRef
    except ImportError:
        _RecordRef = _PyRecordRef


def _as_bytes(what: str, obj: Any, serializer: Callable[[Any], Any] | None) -> Any:
    """A record's key or value through its serializer, str as UTF-8; bytes-like or None."""
    if obj is None:
        return None
    if serializer is not None:
        obj = serializer(obj)
    if isinstance(obj, str):
        obj = obj.encode()
    if not isinstance(obj, bytes | bytearray | memoryview):
        raise TypeError(f"record {what} must be bytes, str or None, not {type(obj)}")
    return obj


class _Topic:
    """What ``send`` keeps per topic: its partition count in the metadata snapshot
    ``cluster``, and the batch each partition's records join (the last of its queue)."""

    __slots__ = ("batches", "cluster", "count")

    def __init__(self, cluster: Cluster, count: int) -> None:
        self.cluster = cluster
        self.count = count
        self.batches: list[_Batch | None] = [None] * count


class RecordFuture(_RecordRef):
    """Delivery future of one record (shares its batch's completion)."""

    __slots__ = ()

    def done(self) -> bool:
        return self._batch.event.is_set()

    def failed(self) -> bool:
        return self.done() and self._batch.error is not None

    def succeeded(self) -> bool:
        return self.done() and self._batch.error is None

    def exception(self) -> BaseException | None:
        return self._batch.error if self.done() else None

    @property
    def value(self) -> RecordMetadata | None:
        return self._batch.record_metadata(self._index) if self.succeeded() else None

    def wait(self, timeout: float | None = None) -> bool:
        return self._batch.event.wait(timeout)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the delivery error or :class:`KafkaTimeoutError`."""
        if not self._batch.event.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout}s")
        if self._batch.error is not None:
            raise self._batch.error
        return self._batch.record_metadata(self._index)

    get = result

    def add_done_callback(self, cb: Callable[[RecordFuture], None]) -> None:
        """``cb(future)`` once delivered or failed (on the network thread)."""
        batch = self._batch
        with _CALLBACK_LOCK:
            if not batch.event.is_set():
                batch.callbacks.append((self._index, cb, self))
                return
        cb(self)


_CALLBACK_LOCK = threading.Lock()


def init_producer_id(net: NetworkClient, node: Hashable,
                     timeout_ms: int) -> tuple[int, int] | None:
    """One InitProducerId round trip (no transactional id): ``(producer id, epoch)``.

    None when the broker refuses with a non-retriable error (idempotence is not available;
    logged); a retriable error or a failed request raises :class:`KafkaError`, and an
    authorization error (CLUSTER_AUTHORIZATION_FAILED: the principal may not write
    idempotently) its :class:`AuthorizationError`, fatal for the producer as in Kafka.
    """
    body = {"transactional_id": None, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1}
    resp = net.call(node, ApiKey.INIT_PRODUCER_ID, body, timeout_ms=timeout_ms)
    code = int(resp.error_code)
    if code:
        err = error_for(code, "InitProducerId")
        if err.retriable or isinstance(err, AuthorizationError):
            raise err
        log.warning("idempotence not available: %s", err)
        return None
    return int(resp.producer_id), int(resp.producer_epoch)


class Sequences:
    """Per-partition sequence numbers of an idempotent producer (KIP-98), wrapping at 2**31."""

    def __init__(self) -> None:
        self._next: dict[TopicPartition, int] = defaultdict(int)

    def take(self, tp: TopicPartition, count: int) -> int:
        """The base sequence of the next batch of ``count`` records to ``tp``."""
        base = self._next[tp]
        self._next[tp] = (base + count) % 2**31
        return base


class Producer:
    """Send records to topics; thread-safe."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, **configs: Any) -> None:
        """``clock``: every deadline and pause of the producer (tests pass a fake one)."""
        unknown = set(configs) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown producer config {sorted(unknown)}")
        c = self.config = {**DEFAULTS, **configs}
        acks = c["acks"]
        self.acks = -1 if acks in ("all", -1, "-1") else int(acks)
        self.compression = COMPRESSION_CODES[c["compression_type"] or "none"]
        self.idempotent = bool(c["enable_idempotence"]) and self.acks == -1
        self._txn: TransactionManager | None = None
        if c["transactional_id"] is not None:  # as Kafka's ProducerConfig: refused, not fixed
            if configs.get("enable_idempotence") is False or self.acks != -1:
                raise ValueError("a transactional producer is idempotent: it needs "
                                 "enable_idempotence and acks=all")
            self._txn = TransactionManager(str(c["transactional_id"]),
                                           int(c["transaction_timeout_ms"]),
                                           int(c["retry_backoff_ms"]))
        #: the coordinator request the sender is to send next (taken off the manager)
        self._txn_request: TxnRequest | None = None
        self.client_id = c["client_id"] or f"samsa-producer-{next(_ids)}"
        self._net = NetworkClient(self.client_id, c["request_timeout_ms"],
                                  c["reconnect_backoff_ms"], client_security(c))
        self._clock = clock
        self._metadata = Metadata(self._net, c["bootstrap_servers"], c["retry_backoff_ms"],
                                  clock=clock)
        self._sticky = StickyPartitioner()
        self._sticky_current = self._sticky.current
        self._key_serializer = c["key_serializer"]
        self._value_serializer = c["value_serializer"]
        self._partitioner = c["partitioner"]
        self._serializing = self._key_serializer is not None or \
            self._value_serializer is not None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, collections.deque[_Batch]] = {}
        self._topics: dict[str, _Topic] = {}
        #: batches whose records are not delivered or failed yet
        self._unfinished: set[_Batch] = set()
        self._in_flight: dict[int, int] = defaultdict(int)
        self._tp_in_flight: dict[TopicPartition, int] = defaultdict(int)
        self._buffered = 0
        self._buffer_memory = c["buffer_memory"]
        self._flushing = 0
        self._closed = False
        #: a fatal error (CLUSTER_AUTHORIZATION_FAILED for a producer id): every queued
        #: record fails with it, and so does every later ``send``
        self._fatal: KafkaError | None = None
        self._metadata_stale = False
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequences = Sequences()
        self._linger = c["linger_ms"] / 1000
        self._batch_size = c["batch_size"]
        self._sender = threading.Thread(target=self._run, daemon=True,
                                        name=f"samsa-sender-{self.client_id}")
        self._sender.start()

    # ---- user API -----------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, *,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] | None = None,
             on_delivery: Callable[[BaseException | None, RecordMetadata | None], None]
             | None = None) -> RecordFuture:
        """Queue a record; the future resolves with its :class:`RecordMetadata`."""
        if self._closed or self._fatal is not None:
            raise self._fatal or KafkaError("producer is closed")
        if key is not None or value.__class__ is not bytes or self._serializing or headers:
            key, value, headers = self._prepare(key, value, headers)
        state = self._topics.get(topic)
        if state is None or state.cluster is not self._metadata.cluster:
            state = self._topic(topic)
        count = state.count
        if partition is None:
            if key is None and self._partitioner is None:
                partition = self._sticky_current.get(topic)
                if partition is None or partition >= count:
                    partition = self._sticky.partition(topic, count)
            elif self._partitioner is not None:
                partition = int(self._partitioner(key, count))
            else:
                partition = partition_for_key(key, count)
        elif not 0 <= partition < count:
            raise KafkaError(f"partition {partition} of {topic} does not exist",
                             ErrorCode.unknown_topic_or_partition)
        size = (len(key) if key else 0) + (len(value) if value else 0) + RECORD_OVERHEAD
        lock = self._lock
        lock.acquire()
        try:
            if self._buffered + size > self._buffer_memory and self._buffered:
                self._wait_for_memory(size)
            if self._txn is not None:
                self._txn.add_partition(TopicPartition(topic, partition))
                self._cond.notify()
            batch = state.batches[partition]
            if batch is None or batch.closed or \
                    (batch.size + size > self._batch_size and batch.count):
                batch = self._new_batch(state, topic, partition, batch)
            fut = RecordFuture(batch, batch.count)
            batch.append(timestamp_ms if timestamp_ms is None else int(timestamp_ms), key, value,
                         headers)
            batch.size += size
            self._buffered += size
            if batch.size >= self._batch_size:
                batch.closed = True
                if key is None and self._partitioner is None:
                    self._sticky.batch_done(topic, partition, count)
                self._cond.notify()
        finally:
            lock.release()
        if on_delivery is not None:
            fut.add_done_callback(lambda f: on_delivery(f.exception(), f.value))
        return fut

    # ---- transactions -------------------------------------------------------------------

    def _manager(self, call: str) -> TransactionManager:
        if self._txn is None:
            raise KafkaError(f"{call} needs a transactional producer (transactional_id)")
        if self._closed:
            raise KafkaError("producer is closed")
        return self._txn

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id with its coordinator: get the producer id and a
        new epoch, fencing any earlier producer with the id (its open transaction is
        completed or aborted first). Called once, before the first transaction; after a
        timeout it may be called again to keep waiting."""
        txn = self._manager("init_transactions")
        with self._cond:
            op = txn.init()
            self._cond.notify_all()
        self._await(op, timeout)

    def begin_transaction(self) -> None:
        """Open a transaction: every record sent until its end belongs to it."""
        txn = self._manager("begin_transaction")
        with self._cond:
            txn.begin()

    def send_offsets_to_transaction(
            self, offsets: Mapping[TopicPartition, Any],
            group_metadata: ConsumerGroupMetadata | str, timeout: float | None = None) -> None:
        """Commit a consumer group's ``offsets`` (offset or ``OffsetAndMetadata``: the next
        record to read) with the transaction: visible to the group once it commits, dropped
        if it aborts. ``group_metadata`` is ``consumer.group_metadata()``, so that the group
        fences offsets of a consumer that lost its partitions (KIP-447); a bare group id
        skips that check."""
        txn = self._manager("send_offsets_to_transaction")
        group = ConsumerGroupMetadata(group_metadata) if isinstance(group_metadata, str) \
            else group_metadata
        with self._cond:
            op = txn.send_offsets(offsets, group)
            self._cond.notify_all()
        self._await(op, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every queued record, then commit: the records and offsets of the
        transaction become visible to read_committed consumers together. Raises
        :class:`TransactionAbortableError` if some of it failed (abort then), and
        :class:`KafkaTimeoutError` if it did not finish in time (call it again)."""
        txn = self._manager("commit_transaction")
        with self._cond:
            op = txn.commit()
            self._flushing += 1
            self._cond.notify_all()
        try:
            self._await(op, timeout)
        finally:
            with self._cond:
                self._flushing -= 1

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with
        :class:`TransactionAbortableError`, those sent are marked aborted and read_committed
        consumers skip them; the staged offsets are dropped."""
        txn = self._manager("abort_transaction")
        with self._cond:
            op = txn.abort()
            failed: list[tuple[_Batch, BaseException | None, int, int]] = []
            error = TransactionAbortableError("the transaction was aborted")
            for queue in self._batches.values():
                for batch in queue:
                    batch.closed = True
                    if batch.encoded is not None:  # it took sequence numbers
                        txn.bump_required = True
                    failed.append((batch, error, -1, -1))
                queue.clear()
            self._flushing += 1
            self._cond.notify_all()
        self._finish(failed)
        try:
            self._await(op, timeout)
        finally:
            with self._cond:
                self._flushing -= 1

    @property
    def transaction_state(self) -> str | None:
        """Kafka's name of the transactional state (None without ``transactional_id``)."""
        return None if self._txn is None else self._txn.state.value

    def _await(self, op: Operation, timeout: float | None) -> None:
        """Wait for a transactional operation; raise its error or a timeout."""
        wait = self.config["max_block_ms"] / 1000 if timeout is None else timeout
        deadline = self._clock.now() + wait
        with self._cond:
            while not op.done:
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    raise KafkaTimeoutError(f"{op.name} did not complete within {wait}s")
                self._clock.wait(self._cond, min(remaining, 0.05))
        if op.error is not None:
            raise op.error

    def _send_txn(self, request: TxnRequest) -> None:
        """Sender thread: one coordinator request of the transaction manager."""
        txn = self._txn
        assert txn is not None
        dest: Hashable
        if request.dest == "any":
            dest = self._metadata.any_node()
        else:
            found = txn.coordinator if request.dest == "transaction" \
                else txn.group_coordinators.get(request.group or "")
            assert found is not None
            dest = (f"{request.dest}-coordinator", found.node_id)
            self._net.set_address(dest, found.host, found.port)
        body = dict(request.body)
        if request.version is not None:
            body["__version__"] = request.version
        if request.max_version is not None:
            body["__max_version__"] = request.max_version
        fut = self._net.send(dest, request.api_key, body)
        fut.add_done_callback(lambda f: self._on_txn_answer(f, request, dest))

    def _on_txn_answer(self, fut: Future[Any], request: TxnRequest, dest: Hashable) -> None:
        """Network thread: feed the manager its answer; adopt a new producer id or epoch."""
        txn = self._txn
        assert txn is not None
        with self._cond:
            now = self._clock.now()
            if fut.failed():
                log.debug("%s failed: %s", request.kind, fut.exception())
                txn.on_failure(fut.exception() or KafkaError(), now)
            else:
                initializing = txn.state is TxnState.INITIALIZING
                txn.on_response(fut.value, now)
                if initializing and txn.state is TxnState.READY:
                    level = self._net.finalized_feature(dest, "transaction.version")
                    txn.tv2 = (level or 0) >= 2
            if (txn.producer_id, txn.producer_epoch) != \
                    (self._producer_id, self._producer_epoch):
                self._producer_id, self._producer_epoch = txn.producer_id, txn.producer_epoch
                self._sequences = Sequences()  # a new epoch starts its sequences at 0
            if txn.state is TxnState.FATAL_ERROR and txn.error is not None:
                self._fatal = txn.error
            self._cond.notify_all()

    def _prepare(self, key: Any, value: Any, headers: Any
                 ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]:
        """Key and value as bytes (through the serializers, str as UTF-8) and the headers,
        checked here so that a bad record fails ``send`` before it joins a batch."""
        key = _as_bytes("key", key, self._key_serializer)
        value = _as_bytes("value", value, self._value_serializer)
        checked: list[tuple[str, bytes | None]] = []
        for h in headers or ():
            try:
                hk, hv = h
            except (TypeError, ValueError):
                hk = hv = None
            if not isinstance(hk, str) or not (
                    hv is None or isinstance(hv, bytes | bytearray | memoryview)):
                raise TypeError(f"a record header is a (str, bytes or None) pair, not {h!r}")
            checked.append((hk, hv if hv is None or isinstance(hv, bytes) else bytes(hv)))
        return key, value, checked or None

    def _new_batch(self, state: _Topic, topic: str, partition: int, full: _Batch | None
                   ) -> _Batch:
        """Open a batch for ``topic``/``partition`` (lock held); ``full`` was the last one."""
        if full is not None and not full.closed:
            full.closed = True
            self._cond.notify()
        tp = TopicPartition(topic, partition)
        batch = _Batch(tp, self._clock.now())
        queue = self._batches.get(tp)
        if queue is None:
            queue = self._batches[tp] = collections.deque()
        queue.append(batch)
        state.batches[partition] = batch
        self._unfinished.add(batch)
        if self._linger == 0:
            self._cond.notify()
        return batch

    def _topic(self, topic: str) -> _Topic:
        """The topic's state for the current metadata (waiting for its metadata first)."""
        cluster = self._metadata.cluster
        count = cluster.partition_count(topic)
        if count is None:
            count = self._wait_for_topic(topic)
            cluster = self._metadata.cluster
        with self._lock:
            state = self._topics.get(topic)
            if state is None:
                state = self._topics[topic] = _Topic(cluster, count)
            else:  # partitions may have been added: the open batches stay
                state.batches += [None] * (count - len(state.batches))
                state.cluster, state.count = cluster, count
            return state

    @property
    def _incomplete(self) -> int:
        """Records sent and not delivered or failed yet (lock held)."""
        return sum(b.count for b in self._unfinished)

    def _wait_for_memory(self, size: int) -> None:
        """Block ``send`` (lock held) until queued records fit in ``buffer_memory``."""
        deadline = self._clock.now() + self.config["max_block_ms"] / 1000
        self._cond.notify_all()
        while self._buffered and self._buffered + size > self._buffer_memory:
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                raise KafkaTimeoutError(f"buffer_memory full for {self.config['max_block_ms']} ms")
            self._clock.wait(self._cond, min(remaining, 0.05))

    def _wait_for_topic(self, topic: str) -> int:
        deadline = self._clock.now() + self.config["max_block_ms"] / 1000
        while True:
            cluster = self._metadata.refresh({topic}, max(0.1, deadline - self._clock.now()))
            count = cluster.partition_count(topic)
            if count:
                return count
            if cluster.unauthorized((topic,)):  # as Kafka's waitOnMetadata: at once
                raise TopicAuthorizationError.of((topic,))
            if self._clock.now() >= deadline:
                raise KafkaTimeoutError(f"topic {topic} not available")
            self._clock.sleep(0.1)

    def partitions_for(self, topic: str) -> set[int]:
        if self._metadata.cluster.partition_count(topic) is None:
            self._wait_for_topic(topic)
        return set(self._metadata.cluster.partitions_for(topic))

    @property
    def buffered_bytes(self) -> int:
        """Bytes of records accepted by ``send`` and not yet completed (what
        ``buffer_memory`` bounds)."""
        with self._cond:
            return self._buffered

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued and wait for it; returns the records still undelivered."""
        deadline = None if timeout is None else self._clock.now() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._incomplete:
                    remaining = None if deadline is None else deadline - self._clock.now()
                    if remaining is not None and remaining <= 0:
                        break
                    self._clock.wait(self._cond,
                                     0.05 if remaining is None else min(remaining, 0.05))
            finally:
                self._flushing -= 1
            return self._incomplete

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the sender and the network thread."""
        if self._closed:
            return
        self.flush(timeout)
        self._closed = True
        with self._cond:
            self._cond.notify_all()
        self._sender.join(5)
        self._net.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sender thread ------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                if self._closed:
                    with self._lock:
                        if not self._incomplete:
                            return
                if self._fatal is not None:
                    self._fail_queued(self._fatal)
                    with self._cond:
                        self._clock.wait(self._cond, 0.1)
                    continue
                if self.idempotent and self._producer_id < 0 and self._txn is None:
                    self._init_producer_id()
                    continue
                if self._metadata_stale:
                    self._metadata_stale = False
                    topics = {tp.topic for tp in self._batches}
                    if topics:
                        self._metadata.refresh(topics, 5.0)
                requests = self._drain()
                for node, batches in requests.items():
                    self._send_produce(node, batches)
                request, self._txn_request = self._txn_request, None
                if request is not None:
                    self._send_txn(request)
            except Exception as exc:  # keep the sender alive; fail nothing silently
                log.warning("producer sender error: %s", exc)
                self._clock.sleep(self.config["retry_backoff_ms"] / 1000)

    def _init_producer_id(self) -> None:
        try:
            got = init_producer_id(self._net, self._metadata.any_node(),
                                   self.config["request_timeout_ms"])
        except AuthorizationError as exc:  # fatal, as in Kafka's TransactionManager
            log.error("producer %s: %s", self.client_id, exc)
            self._fatal = exc
            return
        except KafkaError as exc:
            log.info("InitProducerId failed: %s", exc)
            self._clock.sleep(self.config["retry_backoff_ms"] / 1000)
            return
        if got is None:
            self.idempotent = False
            return
        self._producer_id, self._producer_epoch = got

    def _drain(self) -> dict[int, list[_Batch]]:
        """Wait for ready batches; take at most one per partition, grouped by leader."""
        max_in_flight = self.config["max_in_flight_requests_per_connection"]
        txn = self._txn
        with self._cond:
            while True:
                now = self._clock.now()
                if txn is not None and self._txn_request is None:
                    self._txn_request = txn.next_request(now, not self._unfinished)
                    if self._txn_request is not None:
                        return {}
                flushing = self._flushing > 0 or self._closed
                cluster = self._metadata.cluster
                out: dict[int, list[_Batch]] = defaultdict(list)
                sizes: dict[int, int] = defaultdict(int)
                wait = 0.1
                for tp, queue in self._batches.items():
                    if not queue:
                        continue
                    batch = queue[0]
                    if txn is not None and not txn.partition_ready(tp):
                        continue  # TV1: AddPartitionsToTxn first
                    if batch.retry_at > now:
                        wait = min(wait, batch.retry_at - now)
                        continue
                    ready_at = batch.created + self._linger
                    if not (batch.closed or len(queue) > 1 or flushing or ready_at <= now):
                        wait = min(wait, ready_at - now)
                        continue
                    leader = cluster.leader(tp)
                    if leader is None:
                        self._metadata_stale = True
                        continue
                    if self._in_flight[leader] >= max_in_flight:
                        continue
                    if self.idempotent and self._tp_in_flight[tp] >= max_in_flight:
                        continue
                    if out[leader] and sizes[leader] + batch.size > \
                            self.config["max_request_size"]:
                        continue
                    out[leader].append(batch)
                    sizes[leader] += batch.size
                out = {n: bs for n, bs in out.items() if bs}
                if out:
                    for node, batches in out.items():
                        self._in_flight[node] += 1
                        for batch in batches:
                            self._batches[batch.tp].popleft()
                            self._tp_in_flight[batch.tp] += 1
                            batch.closed = True
                    return out
                if self._metadata_stale or (self._closed and not self._incomplete):
                    return {}
                if txn is not None:
                    txn_wait = txn.wait_time(now)
                    if txn_wait is not None:
                        wait = min(wait, txn_wait)
                self._clock.wait(self._cond, max(0.001, wait))

    def _encode(self, batch: _Batch) -> bytes:
        if batch.encoded is None:
            if self.idempotent:
                batch.base_sequence = self._sequences.take(batch.tp, batch.count)
            batch.encoded = batch.build(
                compression=self.compression,
                producer_id=self._producer_id if self.idempotent else -1,
                producer_epoch=self._producer_epoch if self.idempotent else -1,
                base_sequence=batch.base_sequence, transactional=self._txn is not None)
        return batch.encoded

    def _send_produce(self, node: int, batches: list[_Batch]) -> None:
        """One Produce request; its batches travel as payloads spliced into a frame whose
        rest is encoded once per shape (which partitions of which topics)."""
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        payloads: list[bytes | memoryview] = []
        for batch in batches:
            batch.attempts += 1
            topics[batch.tp.topic].append({"index": batch.tp.partition,
                                           "records": placeholder(len(payloads))})
            payloads.append(self._encode(batch))
        timeout = self.config["request_timeout_ms"]
        txn = self._txn
        body = {"transactional_id": None if txn is None else txn.transactional_id,
                "acks": self.acks, "timeout": timeout,
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}
        if txn is not None and txn.tv2:  # the broker adds the partitions (KIP-890)
            body["__version__"] = TV2_PRODUCE_VERSION
        shape = (self.acks, timeout, tuple((t, tuple(p["index"] for p in ps))
                                           for t, ps in topics.items()))
        fut = self._net.send(node, ApiKey.PRODUCE, body, expect_response=self.acks != 0,
                             payloads=payloads, template=shape)
        fut.add_done_callback(lambda f: self._on_produce(f, node, batches))

    def _on_produce(self, fut: Future[Any], node: int, batches: list[_Batch]) -> None:
        """Network thread: complete, retry or fail each batch of one Produce request."""
        results: dict[TopicPartition, tuple[int, int, int]] = {}
        if fut.succeeded() and fut.value is not None:
            for t in fut.value.responses:
                for p in t.partition_responses:
                    lat = p.log_append_time
                    lat_ms = int(lat.timestamp() * 1000) if hasattr(lat, "timestamp") else \
                        int(lat or -1)
                    results[TopicPartition(t.name, int(p.index))] = (
                        int(p.error_code), int(p.base_offset), lat_ms)
        finished: list[tuple[_Batch, BaseException | None, int, int]] = []
        with self._cond:
            self._in_flight[node] -= 1
            for batch in batches:
                self._tp_in_flight[batch.tp] -= 1
                if fut.succeeded() and self.acks == 0:
                    finished.append((batch, None, -1, -1))
                    continue
                if fut.failed():
                    code, base, lat_ms = _NETWORK_EXCEPTION, -1, -1
                    exc: BaseException | None = fut.exception()
                    self._metadata_stale = True
                else:
                    code, base, lat_ms = results.get(batch.tp, (_NETWORK_EXCEPTION, -1, -1))
                    exc = None if code in (_NONE, _DUPLICATE_SEQUENCE) else error_for(code)
                if exc is None:
                    finished.append((batch, None, base if code == _NONE else -1, lat_ms))
                    continue
                retriable = (isinstance(exc, KafkaError) and exc.retriable) or (
                    self.idempotent and code == _OUT_OF_ORDER_SEQUENCE)
                expired = self._clock.now() - batch.created > \
                    self.config["delivery_timeout_ms"] / 1000
                if retriable and batch.attempts <= self.config["retries"] and not expired:
                    if code in _REFRESH_METADATA:
                        self._metadata_stale = True
                    batch.retry_at = self._clock.now() + self.config["retry_backoff_ms"] / 1000
                    self._requeue(batch)
                else:
                    finished.append((batch, exc, -1, -1))
                    if self._txn is not None:
                        self._txn.batch_failed(batch.tp, exc, batch.base_sequence >= 0)
                        if self._txn.state is TxnState.FATAL_ERROR:
                            self._fatal = self._txn.error
            self._cond.notify_all()
        self._finish(finished)

    def _finish(self, finished: list[tuple[_Batch, BaseException | None, int, int]]) -> None:
        """Complete or fail batches taken off the queues: (batch, error, base offset,
        log append time)."""
        for batch, error, base, lat_ms in finished:
            if error is None:
                batch.done(base, lat_ms)
            else:
                batch.fail(error)
        if finished:
            with self._cond:
                self._unfinished.difference_update(b for b, _, _, _ in finished)
                self._buffered -= sum(b.size - BATCH_OVERHEAD for b, _, _, _ in finished)
                self._cond.notify_all()

    def _fail_queued(self, exc: KafkaError) -> None:
        """Fail every batch still queued with ``exc`` (a fatal error)."""
        with self._cond:
            failed: list[tuple[_Batch, BaseException | None, int, int]] = [
                (b, exc, -1, -1) for queue in self._batches.values() for b in queue]
            for queue in self._batches.values():
                for batch in queue:
                    batch.closed = True
                queue.clear()
        self._finish(failed)

    def _requeue(self, batch: _Batch) -> None:
        """Put a batch back in sequence order ahead of newer batches of its partition."""
        queue = self._batches[batch.tp]
        items = list(queue)
        pos = 0
        while pos < len(items) and items[pos].encoded is not None and \
                items[pos].base_sequence < batch.base_sequence:
            pos += 1
        items.insert(pos, batch)
        queue.clear()
        queue.extend(items)


