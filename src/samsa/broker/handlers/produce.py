"""Produce (key 0): validate batches, append, answer per acks (0: none, 1: OS, -1: fsync).

Records are read only where the topic's configs need it (:mod:`samsa.broker.validate`).
Needs WRITE on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED); idempotence
was granted at InitProducerId, as in Kafka 2.8+.
A transactional producer also needs WRITE on its transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); its batches open its transaction on each partition
(the log's producer state), its coordinator's markers close it.
Versions (v3-12 served): v3 transactional_id and record batch v2 only, one batch per
partition; v4 KAFKA_STORAGE_ERROR; v5 log_start_offset in the answer; v7 zstd; v8
record_errors and error_message for batches refused because of some records (KIP-467); v9
flexible; v10-11 the same here (current_leader and node_endpoints, KIP-951, are never
filled: a single node leads everything); v12 transactions v2 (KIP-890): a transactional
producer's partitions are added to its transaction here, before the append (through the
coordinator's node on a cluster: :meth:`TxnRuntime.add_implicitly
<samsa.broker.transactions.TxnRuntime.add_implicitly>`; the coordinator's
CONCURRENT_TRANSACTIONS, met by the first batch after the previous transaction's end while
its markers are written, is retried here every 20 ms for up to 100 ms, as Kafka's
``add.partitions.to.txn.retry.backoff.ms`` / ``...max.ms``; then it and the coordinator
errors become the retriable NOT_ENOUGH_REPLICAS, PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH); a transactional id's v12 requests take turns, so that they append
in arrival order across that wait.

Verification (KIP-890 part 1, ``transaction.partition.verification.enable``, default true,
dynamic): before v3-11 (transactions v1) let a transactional batch open its producer's
transaction on a partition, the partition asks the transaction coordinator whether it is
in the producer's open transaction at that epoch (:meth:`TxnRuntime.verify
<samsa.broker.transactions.TxnRuntime.verify>`, the coordinator's ``verify_only``
question). A partition that is not gets INVALID_TXN_STATE (v11: TRANSACTION_ABORTABLE, as
Kafka's ``GENERIC_ERROR_SUPPORTED``) and nothing is appended: a produce that arrives after
its transaction was aborted cannot open a transaction nobody will end. Only the first batch
of a transaction per partition is verified: once it opened the transaction there (the
log's producer state) the next batches go straight to the log. A verification guard
(:meth:`ProducerStateManager.start_verification
<samsa.log.producer_state.ProducerStateManager.start_verification>`) refuses a batch whose
transaction a marker closed while the coordinator was being asked. Requests of a
transactional id that verify take turns as v12's do (and so do the id's requests that
arrive meanwhile), so a pipelining producer's batches keep their order.
Untyped on purpose: Produce is the hot path (no typed build plus conversion per request).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.broker import access
from samsa.broker.clock import now_ms
from samsa.broker.context import RequestContext
from samsa.broker.partition import Partition
from samsa.broker.validate import Rejection, check
from samsa.log import AppendInfo, LogError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.batch import InvalidRecords, parse_header, split_batches
from samsa.security.acl import AclOperation, ResourceType
from samsa.transactions import AddPartitions

API_KEY = ApiKey.PRODUCE
VERSIONS = (3, 12)
TV2_VERSION = 12
"""From this version a transactional producer's partitions join its transaction implicitly
(KIP-890, transactions v2)."""
ABORTABLE_VERSION = 11
"""From this version a batch verified outside its transaction is TRANSACTION_ABORTABLE
(before: INVALID_TXN_STATE)."""
VERIFICATION = "transaction.partition.verification.enable"
#: coordinator answers a producer retries, as Produce knows them (Kafka's mapping)
#: Kafka's add.partitions.to.txn.retry.backoff.ms and add.partitions.to.txn.retry.backoff.max.ms
ADD_RETRY_BACKOFF_S, ADD_RETRY_MAX_S = 0.02, 0.1
_RETRIABLE = {ErrorCode.concurrent_transactions, ErrorCode.coordinator_not_available,
              ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator}


def _result(index: int, code: ErrorCode, message: str | None = None,
            info: AppendInfo | None = None, rejection: Rejection | None = None
            ) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": info.base_offset if info else -1,
        "log_append_time": info.log_append_time if info else -1,
        "log_start_offset": info.log_start_offset if info else -1,
        "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                          for i, m in rejection.record_errors] if rejection else [],
        "error_message": message,
    }


def _append(ctx: RequestContext, topic: str, index: int, records: bytes | None,
            now: int) -> tuple[dict[str, Any], Partition | None, int]:
    """Append one partition's records; returns (result, partition, offset to sync)."""
    part = ctx.broker.topics.partition(topic, index)
    if part is None:
        return _result(index, ErrorCode.unknown_topic_or_partition), None, 0
    if ctx.broker.topics.get(topic).internal:  # type: ignore[union-attr]
        return _result(index, ErrorCode.invalid_topic_exception,
                       f"Cannot append to internal topic {topic}"), None, 0
    if not records:
        return _result(index, ErrorCode.corrupt_message, "Produce request has no records"), None, 0
    try:
        headers = split_batches(records)
        if len(headers) != 1:
            # Kafka: Produce v3+ carries exactly one record batch per partition.
            return _result(index, ErrorCode.invalid_record,
                           f"expected one record batch per partition, got {len(headers)}"), None, 0
        rejection = check(records, headers[0], part.log.config, now, f"{topic}-{index}")
        if rejection is not None:
            return _result(index, ErrorCode(rejection.error_code), rejection.message,
                           rejection=rejection), None, 0
        info = part.log.append(records, now, headers)
    except InvalidRecords as exc:
        return _result(index, ErrorCode(exc.error_code), str(exc)), None, 0
    except LogError as exc:
        return _result(index, ErrorCode(exc.error_code), str(exc)), None, 0
    part.notify()
    return _result(index, ErrorCode.none, None, info), part, info.last_offset + 1


class _Turns:
    """One broker's TV2 Produce requests of each transactional id, appended in arrival
    order. Each awaits the coordinator before its append; without turns a later request
    (its partition already added) would append before an earlier one still waiting for
    that addition to be durable, and the earlier batch's sequence would then be out of
    order (a pipelining producer's first batches of every transaction)."""

    def __init__(self) -> None:
        self.locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    def busy(self, transactional_id: str) -> bool:
        """Whether a request of ``transactional_id`` holds or awaits its turn."""
        return transactional_id in self.locks

    @contextlib.asynccontextmanager
    async def turn(self, transactional_id: str) -> AsyncIterator[None]:
        lock, users = self.locks.setdefault(transactional_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self.locks[transactional_id]


_TURNS: weakref.WeakKeyDictionary[Any, _Turns] = weakref.WeakKeyDictionary()


def _turns(ctx: RequestContext) -> _Turns:
    turns = _TURNS.get(ctx.broker)
    if turns is None:
        turns = _TURNS[ctx.broker] = _Turns()
    return turns


def _turn(ctx: RequestContext, transactional_id: str
          ) -> contextlib.AbstractAsyncContextManager[None]:
    """The turn of a Produce request among its transactional id's on this broker."""
    return _turns(ctx).turn(transactional_id)


@dataclass(frozen=True, eq=False)
class _Check:
    """A batch that would open its producer's transaction on its partition."""

    topic: str
    index: int
    part: Partition
    producer_id: int
    epoch: int
    guard: object = None


def _to_verify(ctx: RequestContext, writable: set[str]) -> list[_Check]:
    """The request's transactional batches whose producer has no open transaction on
    their partition yet at their epoch."""
    topics = ctx.broker.topics
    checks = []
    for t in ctx.body.topic_data:
        if t.name not in writable:
            continue
        for p in t.partition_data:
            part = topics.partition(t.name, p.index)
            if part is None or not p.records:
                continue
            try:
                header = parse_header(p.records)
            except InvalidRecords:
                continue  # the append refuses it
            if (header.is_transactional and not header.is_control and header.producer_id >= 0
                    and not part.log.producers.in_transaction(header.producer_id,
                                                              header.producer_epoch)):
                checks.append(_Check(t.name, p.index, part, header.producer_id,
                                     header.producer_epoch))
    return checks


async def _verify(ctx: RequestContext, transactional_id: str, checks: list[_Check]
                  ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], _Check]]:
    """Ask the coordinator about ``checks`` (one question per producer and epoch): the
    error of each partition refused, and the guard of each verified."""
    guarded = [replace(c, guard=c.part.log.producers.start_verification(c.producer_id))
               for c in checks]
    producers: dict[tuple[int, int], list[_Check]] = {}
    for c in guarded:
        producers.setdefault((c.producer_id, c.epoch), []).append(c)
    answers = await asyncio.gather(*(ctx.broker.transactions.verify(AddPartitions(
        transactional_id, pid, epoch, tuple((c.topic, c.index) for c in group),
        verify_only=True)) for (pid, epoch), group in producers.items()))
    outside = (ErrorCode.transaction_abortable if ctx.version >= ABORTABLE_VERSION
               else ErrorCode.invalid_txn_state)
    refused: dict[tuple[str, int], ErrorCode] = {}
    verified: dict[tuple[str, int], _Check] = {}
    for group, answer in zip(producers.values(), answers, strict=True):
        for c in group:
            where = (c.topic, c.index)
            if answer.error_code != ErrorCode.none:
                refused[where] = _as_produce_error(ErrorCode(answer.error_code))
            elif where in answer.unverified:
                refused[where] = outside
            else:
                verified[where] = c
                continue
            c.part.log.producers.end_verification(c.producer_id, c.guard)
    return refused, verified


def _as_produce_error(code: ErrorCode) -> ErrorCode:
    """A coordinator's answer as a producer knows it (Kafka's mapping): retriable ones
    become NOT_ENOUGH_REPLICAS, PRODUCER_FENCED INVALID_PRODUCER_EPOCH."""
    if code in _RETRIABLE:
        return ErrorCode.not_enough_replicas
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return code


async def _add_to_transaction(ctx: RequestContext, transactional_id: str,
                              writable: set[str]) -> dict[tuple[str, int], ErrorCode]:
    """TV2: the partitions of the request join the producer's transaction (its id and epoch
    are its batches'); the error of each that could not."""
    topics = ctx.broker.topics
    wanted = [(t.name, p.index, p.records) for t in ctx.body.topic_data if t.name in writable
              for p in t.partition_data
              if p.records and topics.partition(t.name, p.index) is not None]
    if not wanted:
        return {}
    try:
        header = parse_header(wanted[0][2])
    except InvalidRecords:
        return {}  # the append refuses it
    add = AddPartitions(transactional_id, header.producer_id, header.producer_epoch,
                        tuple((name, index) for name, index, _ in wanted))
    answer = await ctx.broker.transactions.add_implicitly(add)
    waited = 0.0
    while answer.error_code == ErrorCode.concurrent_transactions and waited < ADD_RETRY_MAX_S:
        await asyncio.sleep(ADD_RETRY_BACKOFF_S)
        waited += ADD_RETRY_BACKOFF_S
        answer = await ctx.broker.transactions.add_implicitly(add)
    if answer.error_code == ErrorCode.none:
        return {}
    code = _as_produce_error(ErrorCode(answer.error_code))
    return {(name, index): code for name, index, _ in wanted}


def _append_all(ctx: RequestContext, code: ErrorCode, writable: set[str],
                not_added: dict[tuple[str, int], ErrorCode], now: int,
                topics: list[dict[str, Any]], to_sync: list[tuple[Partition, int]],
                verified: dict[tuple[str, int], _Check] | None = None) -> None:
    """Append every partition's records (or answer its error) into ``topics``; the
    partitions to wait for into ``to_sync``. A ``verified`` batch whose guard a marker
    dropped meanwhile is refused INVALID_TXN_STATE."""
    for t in ctx.body.topic_data:
        results = []
        refused = code if code != ErrorCode.none or t.name in writable \
            else ErrorCode.topic_authorization_failed
        for p in t.partition_data:
            if refused != ErrorCode.none:
                results.append(_result(p.index, refused))
                continue
            if (t.name, p.index) in not_added:
                results.append(_result(p.index, not_added[(t.name, p.index)]))
                continue
            check = verified.get((t.name, p.index)) if verified else None
            if check is not None:
                producers = check.part.log.producers
                ok = producers.verified(check.producer_id, check.epoch, check.guard)
                producers.end_verification(check.producer_id, check.guard)
                if not ok:
                    results.append(_result(p.index, ErrorCode.invalid_txn_state,
                                           "the transaction ended while it was verified"))
                    continue
            result, part, end = _append(ctx, t.name, p.index, p.records, now)
            results.append(result)
            if part is not None:
                to_sync.append((part, end))
        topics.append({"name": t.name, "partition_responses": results})


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    acks = body.acks
    now = now_ms()
    topics: list[dict[str, Any]] = []
    to_sync: list[tuple[Partition, int]] = []
    if body.transactional_id is not None and not access.allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif acks not in (0, 1, -1):
        code = ErrorCode.invalid_required_acks
    else:
        code = ErrorCode.none
    writable = access.allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                    [t.name for t in body.topic_data])
    tid = body.transactional_id
    if code == ErrorCode.none and tid is not None and ctx.version >= TV2_VERSION:
        async with _turn(ctx, tid):
            not_added = await _add_to_transaction(ctx, tid, writable)
            _append_all(ctx, code, writable, not_added, now, topics, to_sync)
    elif (code == ErrorCode.none and tid is not None
          and ctx.broker.topics.dynamic.effective[VERIFICATION]
          and (_turns(ctx).busy(tid) or _to_verify(ctx, writable))):
        async with _turn(ctx, tid):
            checks = _to_verify(ctx, writable)  # again: an earlier turn may have opened some
            refused, verified = await _verify(ctx, tid, checks) if checks else ({}, {})
            _append_all(ctx, code, writable, refused, now, topics, to_sync, verified)
    else:
        _append_all(ctx, code, writable, {}, now, topics, to_sync)
    if acks == 0:
        return None
    if acks == 1:  # an engine whose writes outrun durability bounds its backlog
        rooms = [p.log.wait_room(end) for p, end in to_sync if p.log.backlogged]
        if rooms:
            await asyncio.gather(*rooms)
    if acks == -1 and to_sync:
        try:
            await asyncio.gather(*(p.log.wait_durable(end) for p, end in to_sync))
        except OSError as exc:  # a cluster node's lease moved: NOT_LEADER_OR_FOLLOWER
            code = ErrorCode(getattr(exc, "error_code", ErrorCode.kafka_storage_error))
            for topic in topics:
                for r in topic["partition_responses"]:
                    if r["error_code"] == ErrorCode.none:
                        r["error_code"] = code
    return ctx.respond(responses=topics, throttle_time=0)
