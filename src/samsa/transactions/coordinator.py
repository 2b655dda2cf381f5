"""The transaction coordinator, sans I/O (KIP-98; Kafka's ``TransactionCoordinator``).

Built like the group coordinator: a transactional id belongs to shard
``abs(java_hash(id)) % transaction.state.log.num.partitions`` of ``__transaction_state``;
every call takes ``now`` and returns a :class:`TxnResult`: records to append to the shard's
partition, replies to send once they are durable, and :class:`Markers` to write once they
are durable. Records change the state only through :meth:`TxnShard.replay` (a handler
replays what it writes at once; loading a shard replays its log through the same
function). Timers are the group coordinator's keyed :class:`~samsa.coordinator.timers.Timer`
(kind ``TRANSACTION_TIMEOUT``); a fire is handled like a request.

States and answers (Kafka's ``TransactionState``):

* InitProducerId: a new id gets a producer id at epoch 0 (Empty); a known one in Empty or
  Complete* has its epoch bumped (a new producer id when the epoch is exhausted), which
  fences the previous instance; Ongoing is aborted first under a bumped epoch and answered
  CONCURRENT_TRANSACTIONS (the client retries); Prepare* answers CONCURRENT_TRANSACTIONS.
  With a producer id and epoch (KIP-360, v3+) they must be the current ones, else
  PRODUCER_FENCED.
* AddPartitionsToTxn / AddOffsetsToTxn: producer id INVALID_PRODUCER_ID_MAPPING, epoch
  PRODUCER_FENCED, Prepare* CONCURRENT_TRANSACTIONS; else the partitions join the
  transaction (Ongoing; its timeout starts with the first).
* Verification (KIP-890 part 1, AddPartitionsToTxn v4+ ``verify_only``: a partition leader
  asks before it appends a transactions-v1 producer's first transactional batch): the same
  producer checks and Prepare* CONCURRENT_TRANSACTIONS; else the answer lists the
  partitions that are not in the producer's open transaction (:attr:`TxnAnswer.unverified`,
  TRANSACTION_ABORTABLE each, as Kafka's ``handleVerifyPartitionsInTransaction``). Nothing
  is written.
* EndTxn: Ongoing goes to PrepareCommit / PrepareAbort, answered once durable; the markers
  follow (:class:`Markers`), and :meth:`TxnCoordinator.markers_written` completes the
  transaction (CompleteCommit / CompleteAbort). A retried EndTxn of a completed transaction
  with the same outcome is NONE, the other outcome INVALID_TXN_STATE; a retry while the
  markers are in flight is CONCURRENT_TRANSACTIONS; Empty is INVALID_TXN_STATE.
* Transactions v2 (KIP-890, EndTxn v5): every EndTxn bumps the producer epoch (the markers
  carry the new one, which fences the old in every partition) and answers the new epoch;
  an abort needs no open transaction; a retry with the epoch before the bump is NONE once
  the same outcome completed. Partitions are added implicitly (Produce v12, TxnOffsetCommit
  v5: the edge asks :class:`AddPartitions` on the client's behalf).
* An id idle (Empty or Complete*) for ``transactional.id.expiration.ms`` is forgotten (a
  tombstone); its next InitProducerId starts afresh with a new producer id.
* A transaction open longer than its timeout is aborted under a bumped epoch, so the
  abandoned producer is fenced.
* A loaded shard writes again the markers of every Prepare* transaction it finds (the
  coordinator died between the decision and the markers) and arms the timeouts of the open
  ones.

Error codes are those of the newest versions; handlers map PRODUCER_FENCED to
INVALID_PRODUCER_EPOCH for versions that predate it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from samsa.coordinator.hashing import partition_for
from samsa.coordinator.history.model import LoadInfo
from samsa.coordinator.timers import Timer, TimerKey, TimerKind
from samsa.transactions.records import TxnKey, TxnState, TxnValue

__all__ = [
    "STATE_NAMES",
    "AddPartitions",
    "EndTxn",
    "InitProducerId",
    "Markers",
    "TxnAnswer",
    "TxnConfig",
    "TxnCoordinator",
    "TxnRecord",
    "TxnResult",
    "TxnShard",
]

E = ErrorCode
S = TxnState
MAX_EPOCH = 32767
"""Kafka's ``Short.MAX_VALUE``: a producer id whose epoch reaches it gets a new id."""
PREPARING = (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE)
COMPLETE = (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
IDLE = (S.EMPTY, *COMPLETE)
STATE_NAMES = {S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit",
               S.PREPARE_ABORT: "PrepareAbort", S.COMPLETE_COMMIT: "CompleteCommit",
               S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
               S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
"""Kafka's names of the states (ListTransactions, DescribeTransactions)."""


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's settings (names and defaults)."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms

    @classmethod
    def from_properties(cls, props: dict[str, object]) -> TxnConfig:
        return cls(int(str(props.get("transaction.state.log.num.partitions", 50))),
                   int(str(props.get("transaction.max.timeout.ms", 900_000))),
                   int(str(props.get("transactional.id.expiration.ms", 604_800_000))))


# -- requests -----------------------------------------------------------------------------
@dataclass(frozen=True)
class InitProducerId:
    transactional_id: str
    timeout_ms: int
    #: a producer id the edge allocated, used when the id needs one
    new_producer_id: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class AddPartitions:
    """AddPartitionsToTxn, and AddOffsetsToTxn as the group's ``__consumer_offsets``
    partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    #: only ask whether the partitions are in the open transaction (KIP-890 verification)
    verify_only: bool = False


@dataclass(frozen=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    #: transactions v2 (KIP-890, EndTxn v5): every end bumps the producer's epoch
    bump: bool = False


TxnEvent = InitProducerId | AddPartitions | EndTxn


@dataclass(frozen=True)
class TxnAnswer:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
    #: a verification's partitions that are not in the open transaction
    unverified: tuple[tuple[str, int], ...] = ()


# -- results ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TxnRecord:
    key: TxnKey
    value: TxnValue | None
    partition: int


@dataclass(frozen=True)
class TxnReply:
    token: object
    answer: TxnAnswer


@dataclass(frozen=True)
class Markers:
    """Write a marker (commit or abort) for ``producer_id`` at ``producer_epoch`` to every
    partition of the transaction, then call :meth:`TxnCoordinator.markers_written`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]
    coordinator_epoch: int = 0


@dataclass(frozen=True)
class TxnResult:
    records: tuple[TxnRecord, ...] = ()
    replies: tuple[TxnReply, ...] = ()
    markers: tuple[Markers, ...] = ()

    def __add__(self, other: TxnResult) -> TxnResult:
        return TxnResult(self.records + other.records, self.replies + other.replies,
                         self.markers + other.markers)


# -- one shard ----------------------------------------------------------------------------
@dataclass(eq=False)
class TxnShard:
    """The transactions of one ``__transaction_state`` partition."""

    partition: int
    timer: Timer
    txns: dict[str, TxnValue] = field(default_factory=dict)
    loaded: bool = False
    id_expiration_ms: int = 604_800_000
    coordinator_epoch: int = 0
    """The epoch the shard was loaded under (its lease's): the markers carry it."""

    def replay(self, key: TxnKey, value: TxnValue | None) -> None:
        """Apply one record (the only way the state changes)."""
        if value is None:
            self.txns.pop(key.transactional_id, None)
        else:
            self.txns[key.transactional_id] = value

    def _write(self, tid: str, value: TxnValue | None) -> TxnRecord:
        self.replay(TxnKey(tid), value)
        self._arm(tid, value)
        return TxnRecord(TxnKey(tid), value, self.partition)

    def _arm(self, tid: str, value: TxnValue | None) -> None:
        """The timers of ``tid`` in state ``value``: an open transaction's timeout, an idle
        id's expiry."""
        timeout = self._timer_key(tid)
        expiry = TimerKey(self.partition, TimerKind.TRANSACTIONAL_ID_EXPIRATION, tid)
        if value is not None and value.state is S.ONGOING:
            self.timer.schedule(timeout, value.start_ms + value.timeout_ms)
        else:
            self.timer.cancel(timeout)
        if value is not None and value.state in IDLE:
            self.timer.schedule(expiry, value.last_update_ms + self.id_expiration_ms)
        else:
            self.timer.cancel(expiry)

    def _timer_key(self, tid: str) -> TimerKey:
        return TimerKey(self.partition, TimerKind.TRANSACTION_TIMEOUT, tid)

    # -- requests -------------------------------------------------------------------------
    def init_producer_id(self, ev: InitProducerId, now: int, token: object,
                         max_timeout_ms: int) -> TxnResult:
        tid = ev.transactional_id
        if ev.timeout_ms <= 0 or ev.timeout_ms > max_timeout_ms:
            return _reply(token, E.invalid_transaction_timeout)
        txn = self.txns.get(tid)
        if txn is None:
            value = TxnValue(ev.new_producer_id, 0, ev.timeout_ms, S.EMPTY, (), now, -1)
            return TxnResult((self._write(tid, value),), _answer(token, value))
        if ev.producer_id >= 0 and (ev.producer_id != txn.producer_id
                                    or ev.producer_epoch != txn.producer_epoch):
            return _reply(token, E.producer_fenced)
        if txn.state in PREPARING:
            return _reply(token, E.concurrent_transactions)
        if txn.state is S.ONGOING:  # fence the previous instance: abort under a new epoch
            fenced = self._prepare(tid, txn, commit=False, now=now, bump=True)
            return fenced + _reply(token, E.concurrent_transactions)
        pid, epoch = _bumped(txn.producer_id, txn.producer_epoch, ev.new_producer_id)
        value = TxnValue(pid, epoch, ev.timeout_ms, S.EMPTY, (), now, -1)
        return TxnResult((self._write(tid, value),), _answer(token, value))

    def add_partitions(self, ev: AddPartitions, now: int, token: object) -> TxnResult:
        tid = ev.transactional_id
        txn = self.txns.get(tid)
        error = _check_producer(txn, ev.producer_id, ev.producer_epoch)
        if error is not None:
            return _reply(token, error)
        assert txn is not None
        if txn.state in PREPARING:
            return _reply(token, E.concurrent_transactions)
        if ev.verify_only:
            missing = tuple(tp for tp in ev.partitions if tp not in txn.partitions)
            return TxnResult((), (TxnReply(token, TxnAnswer(E.none, unverified=missing)),))
        wanted = set(ev.partitions)
        if txn.state is S.ONGOING and wanted <= set(txn.partitions):
            return _reply(token, E.none)
        start = txn.start_ms if txn.state is S.ONGOING else now
        partitions = tuple(sorted(wanted | set(txn.partitions)))
        value = replace(txn, state=S.ONGOING, partitions=partitions, last_update_ms=now,
                        start_ms=start)
        return TxnResult((self._write(tid, value),), (TxnReply(token, TxnAnswer(E.none)),))

    def end_txn(self, ev: EndTxn, now: int, token: object) -> TxnResult:
        tid = ev.transactional_id
        txn = self.txns.get(tid)
        if ev.bump and txn is not None and txn.producer_id == ev.producer_id \
                and ev.producer_epoch == txn.producer_epoch - 1:
            return self._retried_after_bump(txn, ev.commit, token)
        error = _check_producer(txn, ev.producer_id, ev.producer_epoch)
        if error is not None:
            return _reply(token, error)
        assert txn is not None
        state = txn.state
        if state is S.ONGOING or (ev.bump and not ev.commit and state in (S.EMPTY, *COMPLETE)):
            # TV2 aborts even without a transaction: the epoch moves on
            decided = self._prepare(tid, txn, ev.commit, now, bump=ev.bump)
            value = self.txns[tid]
            return decided + TxnResult((), _answer(token, value))
        if state is S.COMPLETE_COMMIT:
            return _reply(token, E.none if ev.commit else E.invalid_txn_state)
        if state is S.COMPLETE_ABORT:
            return _reply(token, E.invalid_txn_state if ev.commit else E.none)
        if state is S.PREPARE_COMMIT:
            return _reply(token, E.concurrent_transactions if ev.commit else E.invalid_txn_state)
        if state is S.PREPARE_ABORT:
            return _reply(token, E.invalid_txn_state if ev.commit else E.concurrent_transactions)
        if state is S.PREPARE_EPOCH_FENCE:
            return _reply(token, E.producer_fenced)
        return _reply(token, E.invalid_txn_state)  # Empty, Dead

    def _retried_after_bump(self, txn: TxnValue, commit: bool, token: object) -> TxnResult:
        """A TV2 EndTxn retried with the epoch its first attempt bumped away from: NONE
        once the same outcome completed, CONCURRENT_TRANSACTIONS while its markers are in
        flight, else the producer is fenced."""
        done, deciding = ((S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if commit
                          else (S.COMPLETE_ABORT, S.PREPARE_ABORT))
        if txn.state is done:
            return TxnResult((), _answer(token, txn))
        if txn.state is deciding:
            return _reply(token, E.concurrent_transactions)
        return _reply(token, E.producer_fenced)

    def _prepare(self, tid: str, txn: TxnValue, commit: bool, now: int,
                 bump: bool) -> TxnResult:
        """Decide the open transaction: Prepare* is written, the markers follow once it is
        durable. ``bump``: under the next epoch (fencing the producer that opened it)."""
        epoch = min(txn.producer_epoch + 1, MAX_EPOCH) if bump else txn.producer_epoch
        value = replace(txn, producer_epoch=epoch, last_update_ms=now,
                        state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
        record = self._write(tid, value)
        return TxnResult((record,), (), (_markers(tid, value, self.coordinator_epoch),))

    def markers_written(self, tid: str, producer_id: int, producer_epoch: int,
                        now: int) -> TxnResult:
        """Every marker of ``tid``'s decided transaction is written: it completes."""
        txn = self.txns.get(tid)
        if (txn is None or txn.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
                or (txn.producer_id, txn.producer_epoch) != (producer_id, producer_epoch)):
            return TxnResult()
        done = S.COMPLETE_COMMIT if txn.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        value = replace(txn, state=done, partitions=(), last_update_ms=now)
        return TxnResult((self._write(tid, value),))

    def fire(self, key: TimerKey, now: int) -> TxnResult:
        """A transaction's timeout: abort it under a bumped epoch if it is still open and
        due (a stale or early fire is ignored, or re-armed)."""
        txn = self.txns.get(key.group_id)
        if key.kind is TimerKind.TRANSACTIONAL_ID_EXPIRATION:
            if txn is None or txn.state not in IDLE:
                return TxnResult()
            if now < txn.last_update_ms + self.id_expiration_ms:
                self.timer.schedule(key, txn.last_update_ms + self.id_expiration_ms)
                return TxnResult()
            return TxnResult((self._write(key.group_id, None),))
        if txn is None or txn.state is not S.ONGOING:
            return TxnResult()
        deadline = txn.start_ms + txn.timeout_ms
        if now < deadline:
            self.timer.schedule(key, deadline)
            return TxnResult()
        return self._prepare(key.group_id, txn, commit=False, now=now, bump=True)

    def activate(self) -> TxnResult:
        """The shard is loaded: arm the timeouts of open transactions, and write again the
        markers of decided ones."""
        self.loaded = True
        markers = []
        for tid, txn in self.txns.items():
            self._arm(tid, txn)
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                markers.append(_markers(tid, txn, self.coordinator_epoch))
        return TxnResult((), (), tuple(markers))

    def unload(self) -> None:
        for tid in self.txns:
            self._arm(tid, None)
        self.txns.clear()
        self.loaded = False


def _markers(tid: str, txn: TxnValue, coordinator_epoch: int) -> Markers:
    return Markers(tid, txn.producer_id, txn.producer_epoch,
                   txn.state is S.PREPARE_COMMIT, txn.partitions, coordinator_epoch)


def _bumped(producer_id: int, epoch: int, new_producer_id: int) -> tuple[int, int]:
    if epoch + 1 >= MAX_EPOCH - 1:
        return new_producer_id, 0
    return producer_id, epoch + 1


def _check_producer(txn: TxnValue | None, producer_id: int, epoch: int) -> int | None:
    if txn is None or txn.producer_id != producer_id:
        return E.invalid_producer_id_mapping
    if epoch != txn.producer_epoch:
        return E.producer_fenced
    return None


def _reply(token: object, code: int) -> TxnResult:
    return TxnResult((), (TxnReply(token, TxnAnswer(code)),))


def _answer(token: object, value: TxnValue) -> tuple[TxnReply, ...]:
    return (TxnReply(token, TxnAnswer(E.none, value.producer_id, value.producer_epoch)),)


# -- the coordinator ----------------------------------------------------------------------
class TxnCoordinator:
    """The transaction coordinator shards this node holds."""

    def __init__(self, config: TxnConfig, timer: Timer) -> None:
        self.config = config
        self.timer = timer
        self.shards: dict[int, TxnShard] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def coordinator_error(self, transactional_id: str) -> int:
        """NONE when this node coordinates ``transactional_id``'s shard (loaded),
        COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR otherwise."""
        shard = self.shards.get(self.partition_for(transactional_id))
        if shard is None:
            return E.not_coordinator
        return E.none if shard.loaded else E.coordinator_load_in_progress

    def begin_load(self, partition: int) -> TxnShard:
        self.unload(partition)
        shard = self.shards[partition] = TxnShard(partition, self.timer,
                                                  id_expiration_ms=self.config.id_expiration_ms)
        return shard

    def finish_load(self, partition: int, now_ms: int,
                    info: LoadInfo | None = None) -> TxnResult:
        """The shard replayed its records (:meth:`TxnShard.replay`): activate it. Its
        markers carry the lease epoch it was loaded under (``info``) as coordinator epoch."""
        shard = self.shards[partition]
        if info is not None and info.lease_epoch is not None:
            shard.coordinator_epoch = info.lease_epoch
        return shard.activate()

    def load(self, partition: int, records: Iterable[tuple[TxnKey, TxnValue | None]],
             now_ms: int, info: LoadInfo | None = None) -> TxnResult:
        """Begin, replay and finish a load in one call (tests, the simulation)."""
        shard = self.begin_load(partition)
        for key, value in records:
            shard.replay(key, value)
        return self.finish_load(partition, now_ms, info)

    def unload(self, partition: int) -> TxnResult:
        """Drop the shard (its timers stop); no request is ever parked in it."""
        shard = self.shards.pop(partition, None)
        if shard is not None:
            shard.unload()
        return TxnResult()

    def handle(self, event: TxnEvent, now: int, reply_to: object = None) -> TxnResult:
        tid = event.transactional_id
        if not tid:
            return _reply(reply_to, E.invalid_request)
        error = self.coordinator_error(tid)
        if error:
            return _reply(reply_to, error)
        shard = self.shards[self.partition_for(tid)]
        if isinstance(event, InitProducerId):
            return shard.init_producer_id(event, now, reply_to, self.config.max_timeout_ms)
        if isinstance(event, AddPartitions):
            return shard.add_partitions(event, now, reply_to)
        return shard.end_txn(event, now, reply_to)

    def markers_written(self, markers: Markers, now: int) -> TxnResult:
        shard = self.shards.get(self.partition_for(markers.transactional_id))
        if shard is None or not shard.loaded:
            return TxnResult()
        return shard.markers_written(markers.transactional_id, markers.producer_id,
                                     markers.producer_epoch, now)

    def fire(self, key: TimerKey, now: int) -> TxnResult:
        shard = self.shards.get(key.partition)
        if shard is None or not shard.loaded or key.kind not in (
                TimerKind.TRANSACTION_TIMEOUT, TimerKind.TRANSACTIONAL_ID_EXPIRATION):
            return TxnResult()
        return shard.fire(key, now)

    def transactions(self) -> list[tuple[str, TxnValue]]:
        """Every transactional id of the loaded shards and its state (ListTransactions)."""
        return sorted((tid, txn) for shard in self.shards.values() if shard.loaded
                      for tid, txn in shard.txns.items())

    def describe(self, transactional_id: str) -> tuple[int, TxnValue | None]:
        """DescribeTransactions: (error, state); TRANSACTIONAL_ID_NOT_FOUND for an id this
        coordinator does not know."""
        error = self.coordinator_error(transactional_id)
        if error:
            return error, None
        txn = self.shards[self.partition_for(transactional_id)].txns.get(transactional_id)
        return (E.none, txn) if txn is not None else (E.transactional_id_not_found, None)

    def open_transactions(self) -> int:
        return sum(t.state is S.ONGOING for s in self.shards.values() for t in s.txns.values())

