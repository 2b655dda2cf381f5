"""The transactional producer's state machine (KIP-98, KIP-447, KIP-890), without I/O.

:class:`TransactionManager` is what Kafka's ``TransactionManager`` is to its producer: it
holds the transaction's state, the producer id and epoch, the partitions and groups in the
transaction, and the coordinator requests still to send. The producer
(:mod:`samsa.client.producer`) drives it under its lock: it asks :meth:`next_request` for
one request at a time (sent on the sender thread, answered on the network thread through
:meth:`on_response` / :meth:`on_failure`), tells it of failed batches, and waits on the
:class:`Operation` a user call returned. Time is passed in (seconds).

States (Kafka's)::

    UNINITIALIZED -init-> INITIALIZING -> READY -begin-> IN_TRANSACTION
    IN_TRANSACTION -commit-> COMMITTING -> READY      (EndTxn commit answered)
    IN_TRANSACTION | ABORTABLE_ERROR -abort-> ABORTING -> READY
    IN_TRANSACTION | COMMITTING -abortable error-> ABORTABLE_ERROR (only abort leaves it)
    any -fatal error (fenced, unauthorized)-> FATAL_ERROR (the producer is unusable)

Transaction versions: with ``transaction.version >= 2`` finalized (KIP-890, TV2) partitions
join the transaction implicitly through Produce v12, offsets through TxnOffsetCommit v5
without AddOffsetsToTxn, and EndTxn v5 bumps the epoch at every end (its answer carries the
id and epoch to go on with). Otherwise (TV1) AddPartitionsToTxn (v3 at most) adds each
partition before its first batch is sent, AddOffsetsToTxn precedes TxnOffsetCommit, and an
abort after a failed batch bumps the epoch with InitProducerId (KIP-360), since the failed
batch left a gap in the partition's sequence numbers.

Errors as Kafka's producer treats them: CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS
and other retriable errors are retried (NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE find
the coordinator again first); PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, authorization of the
transactional id or cluster and INVALID_TXN_STATE are fatal; a failed batch, a group
refusing offsets (stale generation, unknown member) or an unauthorized topic or group is
abortable.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    error_for,
)
from samsa.protocol.api_keys import ApiKey

__all__ = [
    "CONCURRENT_BACKOFF_S",
    "COORDINATOR_KEY_TRANSACTION",
    "ConsumerGroupMetadata",
    "Operation",
    "TransactionManager",
    "TxnRequest",
    "TxnState",
]

COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
"""FindCoordinator ``key_type`` of a transactional id."""
#: the first version of each API that belongs to transactions v2 (KIP-890)
TV2_VERSIONS: dict[int, int] = {ApiKey.PRODUCE: 12, ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5}
#: the last version of each API a TV1 producer sends (AddPartitionsToTxn v4+ is the brokers')
TV1_MAX_VERSIONS: dict[int, int] = {ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4,
                    ApiKey.ADD_PARTITIONS_TO_TXN: 3}
CONCURRENT_BACKOFF_S = 0.005
"""A CONCURRENT_TRANSACTIONS answer is retried this soon (Java waits 20 ms): the previous
transaction's markers are being written, which takes a few ms; the first AddPartitionsToTxn
of each TV1 transaction meets it."""

_FATAL = frozenset({
    ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
    ErrorCode.transactional_id_authorization_failed, ErrorCode.cluster_authorization_failed,
    ErrorCode.invalid_txn_state, ErrorCode.invalid_producer_id_mapping,
    ErrorCode.unsupported_version, ErrorCode.unsupported_for_message_format})
_FIND_AGAIN = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                         ErrorCode.request_timed_out})
_GROUP_FENCED = frozenset({ErrorCode.unknown_member_id, ErrorCode.illegal_generation,
                           ErrorCode.fenced_instance_id, ErrorCode.stale_member_epoch,
                           ErrorCode.rebalance_in_progress})
_ABORTABLE = frozenset({ErrorCode.topic_authorization_failed,
                        ErrorCode.group_authorization_failed,
                        ErrorCode.transaction_abortable, ErrorCode.unknown_producer_id})


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs of the consuming group (Kafka's
    ``ConsumerGroupMetadata``): the group id, the generation (classic) or member epoch
    (consumer protocol), the member id and the static instance id; the coordinator fences
    a zombie's offsets with them (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class Operation:
    """A user call in progress (init, offsets, commit, abort): ``done`` once answered,
    with ``error`` if it failed. The producer waits on it; a call timed out and made again
    waits on the same operation, as Kafka's ``TransactionalRequestResult``."""

    name: str
    done: bool = False
    error: KafkaError | None = None

    def finish(self, error: KafkaError | None = None) -> None:
        if not self.done:
            self.done, self.error = True, error


class Coordinator(NamedTuple):
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class TxnRequest:
    """One request to send: ``dest`` is ``"any"`` (a bootstrap node), ``"transaction"``
    (the transaction coordinator) or ``"group"`` (``group``'s coordinator); ``version``
    pins the version, ``max_version`` caps it."""

    kind: str
    api_key: int
    body: dict[str, Any]
    dest: str = "transaction"
    group: str | None = None
    version: int | None = None
    max_version: int | None = None


@dataclass
class _Pending:
    """A request to send: ``kind`` (find, init, add_partitions, add_offsets, txn_offsets,
    end), not before ``not_before``, and what it carries; ``op`` finishes with it."""

    kind: str
    not_before: float = 0.0
    offsets: dict[TopicPartition, tuple[int, str]] = field(default_factory=dict)
    group: ConsumerGroupMetadata | None = None
    op: Operation | None = None
    commit: bool = False


_PRIORITY = {"find": 0, "init": 1, "add_partitions": 2, "add_offsets": 2, "txn_offsets": 2,
             "end": 3}


class TransactionManager:
    """The state of one transactional producer; every method is called under its lock."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int = 60000,
                 retry_backoff_ms: int = 100) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self.state = TxnState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.tv2 = False
        """Transactions v2 (KIP-890): set by the producer from the finalized features."""
        self.coordinator: Coordinator | None = None
        self.group_coordinators: dict[str, Coordinator] = {}
        self.partitions: set[TopicPartition] = set()
        """Partitions in the transaction (TV1: added by the coordinator)."""
        self.pending_partitions: set[TopicPartition] = set()
        """TV1: partitions with records to send, not added yet."""
        self.in_flight_partitions: set[TopicPartition] = set()
        self.started = False
        """Something joined the transaction: its end needs EndTxn."""
        self.error: KafkaError | None = None
        self.bump_required = False
        """TV1: a batch failed after taking sequence numbers: the abort bumps the epoch."""
        self._queue: list[_Pending] = []
        self._in_flight: _Pending | None = None
        self._op: Operation | None = None

    # ---- user calls ---------------------------------------------------------------------

    def init(self) -> Operation:
        """``init_transactions``: find the coordinator, get the producer id and epoch (the
        previous instance is fenced; its open transaction ends first)."""
        if self.state is TxnState.INITIALIZING and self._op is not None:
            return self._op  # a retry after a timeout waits for the same answer
        self._require(TxnState.UNINITIALIZED, "init_transactions")
        self.state = TxnState.INITIALIZING
        self._op = Operation("init")
        self._enqueue(_Pending("init", op=self._op))
        return self._op

    def begin(self) -> None:
        self._require(TxnState.READY, "begin_transaction")
        self.state = TxnState.IN_TRANSACTION

    def add_partition(self, tp: TopicPartition) -> None:
        """A record for ``tp`` is about to be queued (``send``)."""
        self._require(TxnState.IN_TRANSACTION, "send")
        if self.tv2:
            self.partitions.add(tp)
            self.started = True
        elif tp not in self.partitions and tp not in self.pending_partitions \
                and tp not in self.in_flight_partitions:
            self.pending_partitions.add(tp)
            if not any(p.kind == "add_partitions" for p in self._queue):
                self._enqueue(_Pending("add_partitions"))

    def partition_ready(self, tp: TopicPartition) -> bool:
        """May batches of ``tp`` be sent now (TV1: once the coordinator added it)?"""
        return self.tv2 or tp in self.partitions

    def send_offsets(self, offsets: Mapping[TopicPartition, Any],
                     group: ConsumerGroupMetadata) -> Operation:
        """``send_offsets_to_transaction``: stage ``offsets`` (offset, or (offset,
        metadata)) for ``group``; they commit with the transaction."""
        self._require(TxnState.IN_TRANSACTION, "send_offsets_to_transaction")
        staged = {tp: (int(v), "") if isinstance(v, int) else (int(v[0]), v[1] or "")
                  for tp, v in offsets.items()}
        op = Operation("send_offsets")
        if not staged:
            op.finish()
            return op
        self.started = True
        kind = "txn_offsets" if self.tv2 else "add_offsets"
        self._enqueue(_Pending(kind, offsets=staged, group=group, op=op))
        return op

    def commit(self) -> Operation:
        return self._end(True)

    def abort(self) -> Operation:
        return self._end(False)

    def _end(self, commit: bool) -> Operation:
        name = "commit" if commit else "abort"
        want = TxnState.COMMITTING if commit else TxnState.ABORTING
        if self.state is want and self._op is not None:
            return self._op
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if commit and self.state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"the transaction cannot commit, abort it: {self.error}")
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            raise IllegalStateError(f"{name}_transaction: no transaction is open "
                                    f"(state {self.state.value})")
        self.state = want
        self._op = op = Operation(name)
        # offsets and partitions not sent yet stay out of an aborted transaction
        if not commit:
            dropped = [p for p in self._queue if p.kind != "find"]
            self._queue = [p for p in self._queue if p.kind == "find"]
            for p in dropped:
                if p.op is not None:
                    p.op.finish(TransactionAbortableError("the transaction was aborted"))
            self.pending_partitions.clear()
        if self.started or self.partitions or self.in_flight_partitions \
                or self.pending_partitions:
            self._enqueue(_Pending("end", commit=commit, op=op))
        elif not commit and self.bump_required:
            self._enqueue(_Pending("init", op=op))
        else:  # nothing reached the coordinator: nothing to end there
            self._complete()
            op.finish()
        return op

    # ---- the producer's side ------------------------------------------------------------

    def batch_failed(self, tp: TopicPartition, error: BaseException, sequenced: bool) -> None:
        """A batch of ``tp`` failed for good: the transaction must abort (or, fenced or
        unauthorized, the producer is done)."""
        if sequenced:
            self.bump_required = True
        code = getattr(error, "code", -1)
        if code in _FATAL:
            self._fatal(error_for(code, f"a batch of {tp.topic}-{tp.partition} failed"))
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self._abortable(TransactionAbortableError(
                f"a batch of {tp.topic}-{tp.partition} failed: {error}"))

    def next_request(self, now: float, batches_done: bool) -> TxnRequest | None:
        """The request to send now (one at a time), or None. ``batches_done``: no batch is
        queued or in flight (EndTxn waits for that)."""
        if self._in_flight is not None:
            return None
        for pending in sorted(self._queue, key=lambda p: _PRIORITY[p.kind]):
            if pending.not_before > now:
                return None  # in order: a later request waits for an earlier one
            if pending.kind == "end" and not batches_done:
                return None
            if pending.kind == "add_partitions" and not self.pending_partitions:
                self._queue.remove(pending)
                return self.next_request(now, batches_done)
            find = self._find_first(pending)
            if find is not None:
                self._queue.append(find)
                pending = find
            self._in_flight = pending
            return self._build(pending)
        return None

    def _find_first(self, p: _Pending) -> _Pending | None:
        """The FindCoordinator that must precede ``p`` (its coordinator is unknown)."""
        if p.kind == "find":
            return None
        if p.kind == "txn_offsets":
            assert p.group is not None
            if p.group.group_id not in self.group_coordinators:
                return _Pending("find", group=p.group)
            return None
        return _Pending("find") if self.coordinator is None else None

    def wait_time(self, now: float) -> float | None:
        """Seconds until a queued request may be sent (None: nothing queued)."""
        if self._in_flight is not None or not self._queue:
            return None
        return max(0.0, min(p.not_before for p in self._queue) - now)

    @property
    def busy(self) -> bool:
        """A coordinator request is queued or in flight."""
        return self._in_flight is not None or bool(self._queue)

    def on_failure(self, error: BaseException, now: float) -> None:
        """The request in flight failed without an answer (connection, timeout): retried
        after finding its coordinator again."""
        pending = self._take_in_flight()
        if pending is None or self._dropped(pending):
            return
        if pending.kind == "find":
            self._retry(pending, now)
            return
        self._find_again(pending, now)

    def on_response(self, response: Any, now: float) -> None:
        """The answer of the request in flight."""
        pending = self._take_in_flight()
        if pending is None or self._dropped(pending):
            return
        handler = getattr(self, f"_on_{pending.kind}")
        handler(pending, response, now)

    # ---- building requests --------------------------------------------------------------

    def _build(self, p: _Pending) -> TxnRequest:
        tid = self.transactional_id
        ident = {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch}
        if p.kind == "find":
            key = tid if p.group is None else p.group.group_id
            key_type = COORDINATOR_KEY_TRANSACTION if p.group is None else COORDINATOR_KEY_GROUP
            return TxnRequest("find", ApiKey.FIND_COORDINATOR, {
                "key": key, "key_type": key_type, "coordinator_keys": [key]}, dest="any")
        if p.kind == "init":
            return TxnRequest("init", ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": tid, "transaction_timeout": self.transaction_timeout_ms,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch})
        if p.kind == "add_partitions":
            self.in_flight_partitions = set(self.pending_partitions)
            self.pending_partitions.clear()
            topics: dict[str, list[int]] = {}
            for tp in sorted(self.in_flight_partitions):
                topics.setdefault(tp.topic, []).append(tp.partition)
            return TxnRequest("add_partitions", ApiKey.ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": tid,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps}
                                        for t, ps in topics.items()]},
                max_version=TV1_MAX_VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN])
        if p.kind == "add_offsets":
            assert p.group is not None
            return TxnRequest("add_offsets", ApiKey.ADD_OFFSETS_TO_TXN, {
                "transactional_id": tid, **ident, "group_id": p.group.group_id})
        if p.kind == "txn_offsets":
            assert p.group is not None
            g = p.group
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp, (offset, meta) in sorted(p.offsets.items()):
                by_topic.setdefault(tp.topic, []).append({
                    "partition_index": tp.partition, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": meta})
            return self._request("txn_offsets", ApiKey.TXN_OFFSET_COMMIT, {
                "transactional_id": tid, "group_id": g.group_id, **ident,
                "generation_id": g.generation_id, "member_id": g.member_id,
                "group_instance_id": g.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
                group=g.group_id)
        return self._request("end", ApiKey.END_TXN, {
            "transactional_id": tid, **ident, "committed": p.commit})

    def _request(self, kind: str, api_key: ApiKey, body: dict[str, Any],
                 group: str | None = None) -> TxnRequest:
        """A request whose version follows the transaction version (pinned to TV2's,
        capped below it under TV1)."""
        if self.tv2:
            return TxnRequest(kind, api_key, body, "group" if group else "transaction", group,
                              version=TV2_VERSIONS[api_key])
        return TxnRequest(kind, api_key, body, "group" if group else "transaction", group,
                          max_version=TV1_MAX_VERSIONS[api_key])

    # ---- answers ------------------------------------------------------------------------

    def _on_find(self, p: _Pending, resp: Any, now: float) -> None:
        c = resp.coordinators[0] if getattr(resp, "coordinators", None) else resp
        code = int(c.error_code)
        if code:
            if code in _FATAL:
                self._fatal(error_for(code, "FindCoordinator"))
            elif code == ErrorCode.group_authorization_failed:
                self._fail_offsets(error_for(code, "FindCoordinator"))
            else:
                self._retry(p, now)
            return
        found = Coordinator(int(c.node_id), str(c.host), int(c.port))
        if p.group is None:
            self.coordinator = found
        else:
            self.group_coordinators[p.group.group_id] = found

    def _on_init(self, p: _Pending, resp: Any, now: float) -> None:
        code = int(resp.error_code)
        if code:
            self._answer_error(p, code, now, "InitProducerId")
            return
        self.producer_id, self.producer_epoch = int(resp.producer_id), int(resp.producer_epoch)
        self.bump_required = False
        self._complete()
        if p.op is not None:
            p.op.finish()

    def _on_add_partitions(self, p: _Pending, resp: Any, now: float) -> None:
        sent, self.in_flight_partitions = self.in_flight_partitions, set()
        errors: dict[TopicPartition, int] = {}
        for t in resp.results_by_topic_v3_and_below:
            for r in t.results_by_partition:
                errors[TopicPartition(t.name, int(r.partition_index))] = \
                    int(r.partition_error_code)
        failed = {tp: c for tp, c in errors.items()
                  if c not in (ErrorCode.none, ErrorCode.operation_not_attempted)}
        self.partitions |= {tp for tp in sent if errors.get(tp, 0) == ErrorCode.none}
        if self.partitions:
            self.started = True
        if not failed:
            retry = sent - self.partitions
            if retry:  # answered without them (or only OPERATION_NOT_ATTEMPTED): again
                self.pending_partitions |= retry
                self._retry(p, now)
            return
        code = next(iter(failed.values()))
        for c in failed.values():
            if c in _FATAL:
                code = c
        self.pending_partitions |= sent - self.partitions
        self._answer_error(p, code, now, "AddPartitionsToTxn")

    def _on_add_offsets(self, p: _Pending, resp: Any, now: float) -> None:
        code = int(resp.error_code)
        if code:
            self._answer_error(p, code, now, "AddOffsetsToTxn")
            return
        self._enqueue(_Pending("txn_offsets", offsets=p.offsets, group=p.group, op=p.op))

    def _on_txn_offsets(self, p: _Pending, resp: Any, now: float) -> None:
        failed: dict[TopicPartition, int] = {}
        for t in resp.topics:
            for r in t.partitions:
                if int(r.error_code):
                    failed[TopicPartition(t.name, int(r.partition_index))] = int(r.error_code)
        if not failed:
            if p.op is not None:
                p.op.finish()
            return
        code = next(iter(failed.values()))
        if code in _FIND_AGAIN:
            assert p.group is not None
            self.group_coordinators.pop(p.group.group_id, None)
        retry = _Pending("txn_offsets", offsets={tp: p.offsets[tp] for tp in failed
                                                 if tp in p.offsets} or p.offsets,
                         group=p.group, op=p.op)
        if code in _GROUP_FENCED:
            self._fail_offsets(CommitFailedError(
                f"TxnOffsetCommit: {ErrorCode(code).name}: the group rebalanced, the "
                "transaction must abort"), op=p.op)
            return
        self._answer_error(retry, code, now, "TxnOffsetCommit", group=True)

    def _on_end(self, p: _Pending, resp: Any, now: float) -> None:
        code = int(resp.error_code)
        if code:
            self._answer_error(p, code, now, "EndTxn")
            return
        if self.tv2 and int(getattr(resp, "producer_id", -1)) >= 0:
            self.producer_id = int(resp.producer_id)
            self.producer_epoch = int(resp.producer_epoch)
        if not p.commit and self.bump_required and not self.tv2:
            self._enqueue(_Pending("init", op=p.op))  # KIP-360: close the sequence gap
            return
        self._complete()
        if p.op is not None:
            p.op.finish()

    def _answer_error(self, p: _Pending, code: int, now: float, api: str,
                      group: bool = False) -> None:
        if code in _FATAL:
            self._fatal(error_for(code, api))
        elif code in _FIND_AGAIN:
            if not group:
                self.coordinator = None
            self._find_again(p, now)
        elif code in _ABORTABLE:
            err = error_for(code, api)
            if p.kind in ("add_offsets", "txn_offsets"):
                self._fail_offsets(err, op=p.op)
            else:
                self._abortable(err)
        elif ErrorCode(code).retriable or code == ErrorCode.concurrent_transactions:
            self._retry(p, now, CONCURRENT_BACKOFF_S
                        if code == ErrorCode.concurrent_transactions else None)
        else:
            self._fatal(error_for(code, api))

    # ---- transitions --------------------------------------------------------------------

    def _complete(self) -> None:
        """The transaction (or init) ended: ready for the next one."""
        self.state = TxnState.READY
        self.partitions.clear()
        self.pending_partitions.clear()
        self.started = False
        self.error = None
        self._op = None

    def _abortable(self, error: KafkaError) -> None:
        if self.state is TxnState.FATAL_ERROR or self.state is TxnState.ABORTING:
            return
        self.state = TxnState.ABORTABLE_ERROR
        self.error = error
        for p in self._queue:
            if p.op is not None and p.kind != "end":
                p.op.finish(error)
        if self._op is not None and self._op.name == "commit":
            self._op.finish(error)
            self._op = None
        self._queue = [p for p in self._queue if p.kind == "find"]

    def _fatal(self, error: KafkaError) -> None:
        code = error.code
        if code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch):
            error = ProducerFencedError(
                f"{error}: another producer with transactional id "
                f"{self.transactional_id!r} fenced this one", code)
        self.state = TxnState.FATAL_ERROR
        self.error = error
        for p in self._queue:
            if p.op is not None:
                p.op.finish(error)
        if self._op is not None:
            self._op.finish(error)
        self._queue = []

    def _fail_offsets(self, error: KafkaError, op: Operation | None = None) -> None:
        """The group refused the offsets: the send fails and the transaction must abort."""
        if op is not None:
            op.finish(error)
        self._abortable(error)

    def _retry(self, p: _Pending, now: float, backoff: float | None = None) -> None:
        p.not_before = now + (self.retry_backoff if backoff is None else backoff)
        self._queue.append(p)

    def _find_again(self, p: _Pending, now: float) -> None:
        if p.kind == "txn_offsets" and p.group is not None:
            self.group_coordinators.pop(p.group.group_id, None)
        else:
            self.coordinator = None
        if p.kind == "add_partitions":
            self.pending_partitions |= self.in_flight_partitions
            self.in_flight_partitions = set()
        self._retry(p, now)

    def _dropped(self, p: _Pending) -> bool:
        """An answer that no longer matters: the producer is fenced, or the transaction
        whose partitions or offsets it added was aborted meanwhile."""
        if self.state is TxnState.FATAL_ERROR:
            return True
        if p.kind in ("add_partitions", "add_offsets", "txn_offsets") and self.state in (
                TxnState.ABORTING, TxnState.ABORTABLE_ERROR):
            self.in_flight_partitions = set()
            if p.op is not None:
                p.op.finish(self.error or TransactionAbortableError("the transaction was aborted"))
            return True
        return False

    def _take_in_flight(self) -> _Pending | None:
        p, self._in_flight = self._in_flight, None
        if p is not None and p in self._queue:
            self._queue.remove(p)
        return p

    def _enqueue(self, p: _Pending) -> None:
        self._queue.append(p)

    def _require(self, state: TxnState, call: str) -> None:
        if self.state is state:
            return
        if self.state is TxnState.FATAL_ERROR and self.error is not None:
            raise self.error
        if self.state is TxnState.ABORTABLE_ERROR and self.error is not None:
            raise TransactionAbortableError(
                f"{call}: the transaction must be aborted first: {self.error}")
        raise IllegalStateError(f"{call} is not allowed in state {self.state.value}")
