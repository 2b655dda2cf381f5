"""``samsa.ShareConsumer``: a member of a share group (KIP-932), as Kafka's
``KafkaShareConsumer`` and confluent-kafka's ``ShareConsumer``.

Records are acquired, not assigned: members of one share group read the same partitions and
each record goes to one member at a time, for the group's lock duration, with a delivery
count. The parts (see ``docs/share-groups.md``):

* membership: :class:`~samsa.client.group.share_driver.ShareGroupDriver` (ShareGroupHeartbeat:
  join at epoch 0, the broker's heartbeat interval, rejoin when fenced, leave at -1);
* share sessions, fetches and acknowledgements per partition leader:
  :class:`~samsa.client.share.sessions.ShareSessions` (pure);
* the acknowledgement mode: :class:`~samsa.client.share.acknowledgements.Delivered` (pure).

This module is the thin I/O around them: it sends what the machines ask over the client's
network thread, and applies the answers on the user's thread (in ``poll``, the commits and
``close``), where the acknowledgement-commit callback runs too. Not thread-safe, except
:meth:`ShareConsumer.wakeup`.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable
from typing import Any

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from samsa.client.future import Future
from samsa.client.group.share_driver import ShareGroupDriver
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey, NetworkClient
from samsa.client.polling import Waker, deserialize
from samsa.client.records import ConsumerRecord
from samsa.client.security import DEFAULTS as SECURITY_DEFAULTS
from samsa.client.security import client_security
from samsa.client.share.acknowledgements import (
    AcknowledgeType,
    Delivered,
    ack_batches,
)
from samsa.client.share.records import acquired_records
from samsa.client.share.sessions import (
    PartitionAnswer,
    SendShareFetch,
    ShareRequest,
    ShareSessions,
)
from samsa.client.subscription import SubscriptionState, SubscriptionType

__all__ = ["AcknowledgementCommitCallback", "ShareConsumer"]

_ids = itertools.count(1)

AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]], KafkaError | None],
                                         None]
"""``callback(offsets, exception)``: the offsets per partition the broker answered, and the
error (None: acknowledged), as Kafka's ``AcknowledgementCommitCallback``."""

ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}
"""``share_acquire_mode`` (KIP-1206) and its wire value."""

DEFAULTS: dict[str, Any] = {
    **SECURITY_DEFAULTS,
    "bootstrap_servers": "localhost:9092",
    "client_id": None,
    "group_id": None,
    "client_rack": None,
    "share_acknowledgement_mode": "implicit",
    "share_acquire_mode": "batch_optimized",
    "max_poll_records": 500,
    "max_poll_interval_ms": 300000,
    "fetch_min_bytes": 1,
    "fetch_max_wait_ms": 500,
    "fetch_max_bytes": 52428800,
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "reconnect_backoff_ms": 50,
    "metadata_max_age_ms": 300000,
    "check_crcs": True,
    "default_api_timeout_ms": 60000,
    "key_deserializer": None,
    "value_deserializer": None,
}


class ShareConsumer:
    """Consume records of topics as a member of a share group (see the module docstring)."""

    def __init__(self, *topics: str, clock: Clock = SYSTEM_CLOCK, **configs: Any) -> None:
        """Kafka's share consumer configs with ``_`` for ``.`` (``group_id``,
        ``share_acknowledgement_mode``, ``max_poll_records``, ...); ``clock`` for tests."""
        unknown = set(configs) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown share consumer config {sorted(unknown)}")
        c = self.config = {**DEFAULTS, **configs}
        if not c["group_id"]:
            raise ValueError("a share consumer needs a group_id")
        if c["share_acquire_mode"] not in ACQUIRE_MODES:
            raise ValueError("share_acquire_mode must be batch_optimized or record_limit")
        self._delivered = Delivered(c["share_acknowledgement_mode"])
        self.client_id = c["client_id"] or f"samsa-share-consumer-{next(_ids)}"
        self._clock = clock
        self._net = NetworkClient(self.client_id, c["request_timeout_ms"],
                                  c["reconnect_backoff_ms"], client_security(c))
        self._metadata = Metadata(self._net, c["bootstrap_servers"], c["retry_backoff_ms"],
                                  clock=clock)
        self._subs = SubscriptionState("latest")
        self._sessions = ShareSessions(c["retry_backoff_ms"])
        self._buffer: collections.deque[tuple[int, list[ConsumerRecord]]] = collections.deque()
        self._answers: collections.deque[tuple[ShareRequest, Future[Any]]] = \
            collections.deque()
        self._waker = Waker()
        self._closed = False
        self._callback: AcknowledgementCommitCallback | None = None
        self._in_callback = False
        self._next_metadata = 0.0
        self._lock_timeout_ms: int | None = None
        self._group = ShareGroupDriver(
            self._metadata, self._subs, group_id=c["group_id"],
            max_poll_interval_ms=c["max_poll_interval_ms"], rack=c["client_rack"],
            retry_backoff_ms=c["retry_backoff_ms"], client_id=self.client_id,
            wakeup_flag=self._waker.take, clock=clock)
        if topics:
            self.subscribe(topics)

    # ---- subscription -------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group with these topics (replacing any earlier subscription)."""
        self._ensure_open()
        topics = [topics] if isinstance(topics, str) else list(topics)
        if not topics:
            self.unsubscribe()
            return
        if any(not t for t in topics):
            raise ValueError("topic names must not be empty")
        changed = self._subs.subscribe(topics, None, None)
        self._metadata.refresh(self._subs.topics)
        if changed:
            self._group.request_rejoin("subscription changed")

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group assigned this member (shared with other members)."""
        return set(self._subs.assignment)

    def unsubscribe(self) -> None:
        """Acknowledge what the last poll returned (implicit mode: ACCEPT), release the
        records fetched but not yet returned, and leave the group."""
        self._ensure_open()
        self._release_buffered()
        self._sessions.acknowledge(self._delivered.take(), commit=True)
        self._send(set())
        if self._subs.auto_assigned:
            self._group.unsubscribe()
        self._subs.unsubscribe()

    # ---- polling ------------------------------------------------------------------------

    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records acquired for this member, each with its ``delivery_count``; waits up to
        ``timeout_ms`` when none are buffered.

        First the records of the previous poll are acknowledged: implicit mode ACCEPTs them
        all; explicit mode sends what :meth:`acknowledge` recorded and raises
        :class:`IllegalStateError` while a record has no ACCEPT, RELEASE or REJECT. The
        acknowledgements travel with the next ShareFetch.
        """
        self._ensure_open()
        if self._subs.type == SubscriptionType.NONE:
            raise IllegalStateError("not subscribed to any topic")
        self._sessions.acknowledge(self._delivered.for_poll())
        max_records = max_records or self.config["max_poll_records"]
        deadline = self._clock.now() + timeout_ms / 1000
        while True:
            self._waker.check()
            self._group.poll(deadline)
            self._maybe_refresh_metadata()
            self._apply_answers()
            self._run_callbacks()
            self._raise_error()
            records = self._take(max_records)
            self._send(set(self._subs.assignment))
            if records:
                self._delivered.deliver((TopicPartition(r.topic, r.partition), r.offset)
                                        for r in records)
                return self._deserialize(records)
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                return []
            self._wait(min(remaining, 0.1))

    def acknowledge(self, record: ConsumerRecord,
                    ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: acknowledge a record of the last poll (sent with the next poll or
        commit). ACCEPT: done; RELEASE: deliver again; REJECT: archive; RENEW: extend its
        lock (it must still be acknowledged after)."""
        self.acknowledge_offset(record.topic, record.partition, record.offset, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """:meth:`acknowledge` by topic, partition and offset."""
        self._ensure_open()
        self._delivered.acknowledge(TopicPartition(topic, partition), offset,
                                    AcknowledgeType(ack_type))

    def _take(self, n: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while self._buffer and len(out) < n:
            node, records = self._buffer[0]
            taken = records[: n - len(out)]
            out.extend(taken)
            if len(taken) == len(records):
                self._buffer.popleft()
            else:
                self._buffer[0] = (node, records[len(taken):])
        return out

    def _deserialize(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        return deserialize(records, self.config["key_deserializer"],
                           self.config["value_deserializer"])

    # ---- commits ------------------------------------------------------------------------

    def commit_sync(self, timeout_ms: float | None = None
                    ) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements (implicit mode: the last poll's records as ACCEPT) in
        ShareAcknowledge requests and wait for the answers: per partition None or the
        error (e.g. INVALID_RECORD_STATE when a lock had expired). ``{}`` when there was
        nothing to acknowledge; :class:`KafkaTimeoutError` past ``timeout_ms`` (default
        ``default_api_timeout_ms``)."""
        self._ensure_open()
        acks = self._delivered.take()
        if not any(acks.values()):
            self._run_callbacks()
            return {}
        cid = self._sessions.acknowledge(acks, commit=True)
        assert cid is not None
        timeout = self.config["default_api_timeout_ms"] if timeout_ms is None else timeout_ms
        deadline = self._clock.now() + timeout / 1000
        while True:
            self._apply_answers()
            result = self._sessions.commit_result(cid)
            if result is not None:
                self._run_callbacks()
                return {tp: error_for(code) if code else None for tp, code in result.items()}
            self._send(set(self._subs.assignment) if not self._closed else set())
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                raise KafkaTimeoutError(f"acknowledgements not answered within {timeout} ms")
            self._wait(min(remaining, 0.1))

    def commit_async(self) -> None:
        """Send the acknowledgements without waiting; the callback hears the answers in a
        later ``poll``, commit or ``close``."""
        self._ensure_open()
        self._sessions.acknowledge(self._delivered.take(), commit=True)
        self._apply_answers()
        self._send(set(self._subs.assignment))

    def set_acknowledgement_commit_callback(
            self, callback: AcknowledgementCommitCallback | None) -> None:
        """``callback(offsets, exception)`` for every answered acknowledgement, run on the
        user's thread in ``poll``, the commits and ``close`` (None: no callback)."""
        if self._in_callback:
            raise IllegalStateError("not from within the acknowledgement commit callback")
        if callback is not None and not callable(callback):
            raise TypeError("the acknowledgement commit callback must be callable or None")
        self._callback = callback

    def _run_callbacks(self) -> None:
        results, self._sessions.results = self._sessions.results, []
        if self._callback is None or self._in_callback:
            return
        self._in_callback = True
        try:
            for r in results:
                self._callback({r.tp: set(r.offsets)},
                               error_for(r.error, f"acknowledge {r.tp}") if r.error else None)
        finally:
            self._in_callback = False

    # ---- the network --------------------------------------------------------------------

    def _leader(self, tp: TopicPartition) -> int | None:
        """The node leading ``tp``, if metadata knows it and its topic id."""
        cluster = self._metadata.cluster
        return cluster.leader(tp) if tp.topic in cluster.topic_ids else None

    def _send(self, assigned: set[TopicPartition]) -> None:
        buffered = {node for node, _ in self._buffer}
        for request in self._sessions.step(self._now_ms(), self._leader, assigned, buffered):
            self._send_request(request)

    def _send_request(self, request: ShareRequest) -> None:
        c = self.config
        ids = self._metadata.cluster.topic_ids
        by_topic: dict[str, dict[int, list[dict[str, Any]]]] = {}
        parts = request.partitions if isinstance(request, SendShareFetch) else request.acks
        for tp in parts:
            by_topic.setdefault(tp.topic, {})[tp.partition] = [
                {"first_offset": f, "last_offset": last, "acknowledge_types": list(types)}
                for f, last, types in ack_batches(request.acks.get(tp, {}))]
        topics = [{"topic_id": ids[t], "partitions": [
            {"partition_index": p, "acknowledgement_batches": batches}
            for p, batches in sorted(ps.items())]}
            for t, ps in sorted(by_topic.items()) if t in ids]
        body: dict[str, Any] = {
            "group_id": self._group.group_id, "member_id": self._group.member_id,
            "share_session_epoch": request.epoch, "is_renew_ack": request.renew,
            "topics": topics}
        if isinstance(request, SendShareFetch):
            forgotten: dict[str, list[int]] = {}
            for tp in request.forgotten:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
            body.update(
                max_wait=c["fetch_max_wait_ms"], min_bytes=c["fetch_min_bytes"],
                max_bytes=c["fetch_max_bytes"], max_records=c["max_poll_records"],
                batch_size=c["max_poll_records"],
                share_acquire_mode=ACQUIRE_MODES[c["share_acquire_mode"]],
                forgotten_topics_data=[{"topic_id": ids[t], "partitions": sorted(ps)}
                                       for t, ps in sorted(forgotten.items()) if t in ids])
            api, timeout = ApiKey.SHARE_FETCH, c["fetch_max_wait_ms"] + c["request_timeout_ms"]
        else:
            api, timeout = ApiKey.SHARE_ACKNOWLEDGE, c["request_timeout_ms"]
        fut = self._net.send(request.node, api, body, timeout_ms=timeout)
        fut.add_done_callback(lambda f: self._answered(request, f))

    def _answered(self, request: ShareRequest, fut: Future[Any]) -> None:
        """Network thread: queue the answer for the user's thread."""
        self._answers.append((request, fut))
        self._waker.notify()

    def _apply_answers(self) -> None:
        """User thread: apply the answers to the sessions; buffer the acquired records."""
        names = self._metadata.cluster.topic_names
        check = bool(self.config["check_crcs"])
        while self._answers:
            request, fut = self._answers.popleft()
            if fut.failed():
                self._sessions.on_failed(request, self._now_ms())
                continue
            resp = fut.value
            lock = getattr(resp, "acquisition_lock_timeout", None)
            if lock is not None and not resp.error_code:
                self._lock_timeout_ms = round(lock.total_seconds() * 1000)
            parts: list[PartitionAnswer] = []
            fetched: list[ConsumerRecord] = []
            for topic in resp.responses:
                name = names.get(topic.topic_id)
                if name is None:
                    self._sessions.metadata_stale = True
                    continue
                for p in topic.partitions:
                    tp = TopicPartition(name, int(p.partition_index))
                    parts.append(PartitionAnswer(tp, int(p.error_code),
                                                 int(getattr(p, "acknowledge_error_code", 0))))
                    acquired = [(int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                                for a in getattr(p, "acquired_records", ())]
                    if not acquired:
                        continue
                    records, gaps = acquired_records(tp, p.records, acquired, check)
                    fetched.extend(records)
                    if gaps:
                        self._sessions.acknowledge({tp: dict.fromkeys(gaps, AcknowledgeType.GAP)})
            self._sessions.on_answer(request, self._now_ms(), int(resp.error_code), parts)
            if fetched:
                self._buffer.append((request.node, fetched))

    def _release_buffered(self) -> None:
        """Records fetched but never returned go back to the group (RELEASE)."""
        for _, records in self._buffer:
            acks: dict[TopicPartition, dict[int, AcknowledgeType]] = {}
            for r in records:
                acks.setdefault(TopicPartition(r.topic, r.partition), {})[r.offset] = \
                    AcknowledgeType.RELEASE
            self._sessions.acknowledge(acks)
        self._buffer.clear()

    def _raise_error(self) -> None:
        code, self._sessions.error = self._sessions.error, None
        if code:
            raise error_for(code, "ShareFetch")

    def _now_ms(self) -> float:
        return self._clock.now() * 1000

    def _wait(self, seconds: float) -> None:
        self._waker.wait(self._clock, seconds, lambda: bool(self._answers))

    def _maybe_refresh_metadata(self) -> None:
        now = self._clock.now()
        if not self._sessions.metadata_stale and now < self._next_metadata:
            return
        self._sessions.metadata_stale = False
        self._next_metadata = now + self.config["metadata_max_age_ms"] / 1000
        if self._subs.topics:
            try:
                self._metadata.refresh(self._subs.topics, 5.0)
            except KafkaError:
                self._sessions.metadata_stale = True

    # ---- wakeup and lifecycle -----------------------------------------------------------

    def wakeup(self) -> None:
        """Make a blocked (or the next) ``poll`` raise :class:`WakeupError`. Thread-safe."""
        self._waker.wakeup()

    def close(self, timeout_ms: float | None = None) -> None:
        """Acknowledge (implicit mode: ACCEPT the last poll's records; explicit: what was
        acknowledged), close every share session (the broker releases what this member
        still holds: records fetched but not returned, unacknowledged ones), then leave the
        group. Waits up to ``timeout_ms`` (default 30 s) for the answers."""
        if self._closed:
            return
        timeout = 30000 if timeout_ms is None else timeout_ms
        deadline = self._clock.now() + timeout / 1000
        try:
            self._sessions.acknowledge(self._delivered.take(), commit=True)
            self._buffer.clear()
            # let in-flight fetches end and commits go out, then close the sessions
            while self._clock.now() < deadline:
                self._apply_answers()
                self._send(set())
                if not self._sessions.in_flight():
                    break
                self._wait(min(0.1, deadline - self._clock.now()))
            self._apply_answers()
            for request in self._sessions.close(self._leader):
                self._send_request(request)
            while self._sessions.in_flight() and self._clock.now() < deadline:
                self._wait(min(0.1, deadline - self._clock.now()))
                self._apply_answers()
            self._run_callbacks()
            self._group.close(commit=False)
        finally:
            self._closed = True
            self._net.close()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("share consumer is closed")

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def member_id(self) -> str:
        return self._group.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long the broker locks the records it gives this member (from its last
        answer; None before one): Kafka's ``acquisitionLockTimeoutMs()``."""
        return self._lock_timeout_ms

    @property
    def member_state(self) -> str:
        """Kafka's member states: UNSUBSCRIBED, JOINING, RECONCILING, STABLE, FENCED..."""
        return self._group.state

    @property
    def member_epoch(self) -> int:
        return self._group.generation
