"""``samsa.Consumer``: Kafka's consumer with group membership, on kafka-python's config names.

Not thread-safe, except :meth:`Consumer.wakeup`. See ``docs/client.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from samsa import TopicPartition
from samsa.assignors import Assignor, RebalanceProtocol, resolve_assignor
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    TopicAuthorizationError,
)
from samsa.client.fetcher import FetchConfig, Fetcher
from samsa.client.future import Future
from samsa.client.group.actions import NO_GENERATION, NO_MEMBER_ID
from samsa.client.group.classic_driver import ConsumerCoordinator
from samsa.client.group.classic_machine import MembershipConfig
from samsa.client.group.commits import OffsetAndMetadata
from samsa.client.group.consumer_driver import ConsumerProtocolCoordinator, check_group_protocol
from samsa.client.group.context import MemberStatus
from samsa.client.group.driver import GroupDriver
from samsa.client.metadata import Metadata
from samsa.client.net import NetworkClient
from samsa.client.offsets import EARLIEST, LATEST, list_offsets
from samsa.client.polling import Waker, deserialize
from samsa.client.records import ConsumerRecord
from samsa.client.security import DEFAULTS as SECURITY_DEFAULTS
from samsa.client.security import client_security
from samsa.client.subscription import SubscriptionState, SubscriptionType
from samsa.client.transactions import ConsumerGroupMetadata

__all__ = ["Consumer", "ConsumerRebalanceListener"]

_ids = itertools.count(1)

DEFAULTS: dict[str, Any] = {
    **SECURITY_DEFAULTS,
    "bootstrap_servers": "localhost:9092",
    "client_id": None,
    "group_id": None,
    "group_instance_id": None,
    "group_protocol": "classic",
    "group_remote_assignor": None,
    "partition_assignment_strategy": ("range", "cooperative-sticky"),
    "client_rack": None,
    "auto_offset_reset": "latest",
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "max_poll_interval_ms": 300000,
    "max_poll_records": 500,
    "fetch_min_bytes": 1,
    "fetch_max_wait_ms": 500,
    "fetch_max_bytes": 52428800,
    "max_partition_fetch_bytes": 1048576,
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "reconnect_backoff_ms": 50,
    "metadata_max_age_ms": 300000,
    "check_crcs": True,
    "isolation_level": "read_uncommitted",
    "default_api_timeout_ms": 60000,
    "consumer_timeout_ms": float("inf"),
    "key_deserializer": None,
    "value_deserializer": None,
}


class ConsumerRebalanceListener:
    """Base class for rebalance listeners (any object with these methods works)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before partitions are taken away (after fetching stopped): commit, flush state."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After new partitions are assigned, before fetching them: seek, load state."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """Partitions already owned by others (generation lost); defaults to revoked."""
        self.on_partitions_revoked(lost)


class Consumer:
    """Consume records from topics or partitions, as a member of a group or on its own."""

    def __init__(self, *topics: str, clock: Clock = SYSTEM_CLOCK, **configs: Any) -> None:
        """``clock``: every timeout and pause of the consumer (tests pass a fake one)."""
        unknown = set(configs) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown consumer config {sorted(unknown)}")
        protocol = check_group_protocol(configs)
        self.config = {**DEFAULTS, **configs, "group_protocol": protocol}
        c = self.config
        if c["auto_offset_reset"] not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        if c["isolation_level"] not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        self._read_committed = c["isolation_level"] == "read_committed"
        # Everything that can refuse the configuration comes before the network thread.
        self._assignors: list[Assignor] = [resolve_assignor(a)
                                           for a in c["partition_assignment_strategy"]]
        cooperative = all(RebalanceProtocol.COOPERATIVE in a.supported_protocols
                          for a in self._assignors)
        membership: MembershipConfig | None = None
        if c["group_id"] is not None and protocol == "classic":
            membership = MembershipConfig(
                group_id=c["group_id"], group_instance_id=c["group_instance_id"],
                session_timeout_ms=c["session_timeout_ms"],
                rebalance_timeout_ms=c["max_poll_interval_ms"],
                heartbeat_interval_ms=c["heartbeat_interval_ms"],
                retry_backoff_ms=c["retry_backoff_ms"], cooperative=cooperative,
                assignors=tuple(a.name for a in self._assignors))
        self.client_id = c["client_id"] or f"samsa-consumer-{next(_ids)}"
        self._clock = clock
        self._net = NetworkClient(self.client_id, c["request_timeout_ms"],
                                  c["reconnect_backoff_ms"], client_security(c))
        self._metadata = Metadata(self._net, c["bootstrap_servers"], c["retry_backoff_ms"],
                                  clock=clock)
        self._subs = SubscriptionState(c["auto_offset_reset"])
        self._waker = Waker()
        self._closed = False
        self._iter_buffer: list[ConsumerRecord] = []
        self._async_callbacks: list[tuple[Callable[..., None], Any, BaseException | None]] = []
        self._fetcher = Fetcher(self._metadata, self._subs, FetchConfig(
            fetch_min_bytes=c["fetch_min_bytes"], fetch_max_wait_ms=c["fetch_max_wait_ms"],
            fetch_max_bytes=c["fetch_max_bytes"],
            max_partition_fetch_bytes=c["max_partition_fetch_bytes"],
            max_poll_records=c["max_poll_records"], check_crcs=c["check_crcs"],
            client_rack=c["client_rack"], auto_offset_reset=c["auto_offset_reset"],
            read_committed=self._read_committed),
            self._waker.notify)
        self._coordinator: GroupDriver[Any] | None = None
        if c["group_id"] is not None and protocol == "consumer":
            self._coordinator = ConsumerProtocolCoordinator(
                self._metadata, self._subs, group_id=c["group_id"],
                group_instance_id=c["group_instance_id"],
                rebalance_timeout_ms=c["max_poll_interval_ms"],
                server_assignor=c["group_remote_assignor"], rack=c["client_rack"],
                retry_backoff_ms=c["retry_backoff_ms"], client_id=self.client_id,
                auto_commit=bool(c["enable_auto_commit"]),
                auto_commit_interval_ms=c["auto_commit_interval_ms"],
                wakeup_flag=self._waker.take, on_assignment_changed=self._fetcher.clear,
                clock=clock)
        elif membership is not None:
            self._coordinator = ConsumerCoordinator(
                self._metadata, self._subs, membership, self._assignors,
                client_id=self.client_id, auto_commit=bool(c["enable_auto_commit"]),
                auto_commit_interval_ms=c["auto_commit_interval_ms"], rack=c["client_rack"],
                wakeup_flag=self._waker.take, on_assignment_changed=self._fetcher.clear,
                on_group_answer=self._waker.notify, clock=clock)
        self._next_metadata = 0.0
        if topics:
            self.subscribe(topics)

    # ---- subscription -------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None,
                  listener: Any = None) -> None:
        """Join the group with these topics (or every topic matching ``pattern``)."""
        self._ensure_open()
        if self._coordinator is None:
            raise IllegalStateError("subscribe() needs a group_id")
        if isinstance(topics, str):
            topics = [topics]
        changed = self._subs.subscribe(topics, pattern, listener)
        if pattern is not None:
            cluster = self._metadata.refresh(None)
            self._subs.match_pattern(cluster.partitions, cluster.internal)
        else:
            self._metadata.refresh(self._subs.topics)
        if changed:
            self._coordinator.request_rejoin("subscription changed")

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def unsubscribe(self) -> None:
        """Leave the group (or drop the manual assignment)."""
        self._ensure_open()
        if self._coordinator is not None and self._subs.auto_assigned:
            self._coordinator.unsubscribe()
        self._subs.unsubscribe()
        self._fetcher.clear()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without group management."""
        self._ensure_open()
        parts = [TopicPartition(*tp) for tp in partitions]
        self._subs.assign_from_user(parts)
        self._fetcher.clear({tp for tp in self._fetcher.buffered_partitions()
                             if tp not in set(parts)})
        if parts:
            self._metadata.refresh({tp.topic for tp in parts})

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    # ---- polling ------------------------------------------------------------------------

    def poll(self, timeout_ms: float = 0, max_records: int | None = None
             ) -> list[ConsumerRecord]:
        """Records from assigned partitions; waits up to ``timeout_ms`` when none are buffered.

        It returns by its deadline also while a rebalance is under way: a JoinGroup or
        SyncGroup parked on the coordinator stays in flight and later polls go on with it
        (a cooperative member meanwhile returns records of the partitions it keeps).
        Raises :class:`WakeupError` if :meth:`wakeup` was called, and the authorization
        errors as Kafka's consumer does: :class:`TopicAuthorizationError` when metadata, a
        fetch, an offset lookup or the group's heartbeat refuse a subscribed or assigned
        topic (the consumer goes on: a later poll raises it again while it lasts),
        :class:`GroupAuthorizationError` (fatal) when the group is refused.
        """
        self._ensure_open()
        if self._subs.type == SubscriptionType.NONE:
            raise IllegalStateError("not subscribed to any topic or assigned any partition")
        max_records = max_records or self.config["max_poll_records"]
        deadline = self._clock.now() + timeout_ms / 1000
        while True:
            self._waker.check()
            self._run_async_callbacks()
            if self._coordinator is not None:
                self._coordinator.poll(deadline)
            self._maybe_refresh_metadata()
            if self._subs.missing_positions():
                self._update_positions(deadline)
            records = self._fetcher.fetched_records(max_records)
            if records:
                self._fetcher.send_fetches()  # pipelining: next fetch before returning
                return self._deserialize(records)
            self._fetcher.send_fetches()
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                return []
            self._waker.wait(self._clock, min(remaining, 0.1), self._fetcher.has_completed)

    def _deserialize(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        return deserialize(records, self.config["key_deserializer"],
                           self.config["value_deserializer"])

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        timeout = self.config["consumer_timeout_ms"]
        now = self._clock.now
        deadline = now() + timeout / 1000 if timeout != float("inf") else None
        while not self._iter_buffer:
            wait = 1000.0 if deadline is None else max(0.0, (deadline - now()) * 1000)
            self._iter_buffer = self.poll(min(wait, 1000.0))
            self._iter_buffer.reverse()
            if not self._iter_buffer and deadline is not None and now() >= deadline:
                raise StopIteration
        return self._iter_buffer.pop()

    def wakeup(self) -> None:
        """Make a blocked (or the next) ``poll`` raise :class:`WakeupError`. Thread-safe."""
        self._waker.wakeup()

    def _maybe_refresh_metadata(self) -> None:
        now = self._clock.now()
        if not self._fetcher.metadata_stale and now < self._next_metadata:
            return
        self._fetcher.metadata_stale = False
        self._next_metadata = now + self.config["metadata_max_age_ms"] / 1000
        try:
            if self._subs.type == SubscriptionType.PATTERN:
                self._metadata.refresh(None, 5.0)
            elif self._subs.topics:
                self._metadata.refresh(self._subs.topics, 5.0)
        except KafkaError:
            self._fetcher.metadata_stale = True
            return
        if self._coordinator is not None:
            self._coordinator.check_metadata()
        denied = self._metadata.cluster.unauthorized(self._subs.topics)
        if denied:  # raised once per refresh, as Kafka's consumer does
            raise TopicAuthorizationError.of(denied)

    def _update_positions(self, deadline: float) -> None:
        """Committed offsets, then ``auto_offset_reset``, for partitions without a position.

        The committed offsets are waited for until ``deadline`` only: an OffsetFetch not
        answered by then stays in flight for the next call (it may be queued behind a
        JoinGroup parked on the coordinator).
        """
        missing = [tp for tp in self._subs.missing_positions()
                   if self._subs.assignment[tp].reset is None]
        timeout = max(1.0, deadline - self._clock.now())
        if missing and self._coordinator is not None:
            committed = self._coordinator.poll_committed(missing, deadline)
            if committed is None:
                return
            for tp in missing:
                st = self._subs.assignment.get(tp)
                c = committed.get(tp)
                if st is None:
                    continue
                if c is not None:
                    st.position = c.offset
                else:
                    st.reset = self.config["auto_offset_reset"]
        else:
            for tp in missing:
                self._subs.assignment[tp].reset = self.config["auto_offset_reset"]
        resets: dict[TopicPartition, int] = {}
        for tp in self._subs.missing_positions():
            strategy = self._subs.assignment[tp].reset
            if strategy == "earliest":
                resets[tp] = EARLIEST
            elif strategy == "latest":
                resets[tp] = LATEST
            else:
                raise NoOffsetForPartitionError(f"no committed offset for {tp} and "
                                                "auto_offset_reset is none")
        if resets:
            found = list_offsets(self._metadata, resets,
                                 max(timeout, self.config["default_api_timeout_ms"] / 1000),
                                 read_committed=self._read_committed)
            for tp, (offset, _) in found.items():
                st = self._subs.assignment.get(tp)
                if st is not None and st.position is None:
                    st.position = offset
                    st.reset = None

    # ---- positions ----------------------------------------------------------------------

    def position(self, partition: TopicPartition) -> int:
        """Offset of the next record ``poll`` returns for ``partition``."""
        st = self._subs.state(partition)
        if st.position is None:
            self._update_positions(self._clock.now() +
                                   self.config["default_api_timeout_ms"] / 1000)
        if st.position is None:
            raise KafkaTimeoutError(f"no position for {partition} within "
                                    f"default_api_timeout_ms")
        return st.position

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` on the next poll."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        st = self._subs.state(partition)
        st.position = offset
        st.reset = None
        self._fetcher.clear({partition})

    def _seek_to(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        parts = list(partitions) or list(self._subs.assignment)
        for tp in parts:
            st = self._subs.state(tp)
            st.position = None
            st.reset = strategy
        self._fetcher.clear(set(parts))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, "latest")

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching these partitions until :meth:`resume`."""
        for tp in partitions:
            self._subs.state(tp).paused = True
        self._fetcher.clear(set(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subs.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._subs.assignment.items() if st.paused}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in list_offsets(
            self._metadata, dict.fromkeys(partitions, EARLIEST)).items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in list_offsets(
            self._metadata, dict.fromkeys(partitions, LATEST),
            read_committed=self._read_committed).items()}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, int | None]:
        """First offset with a timestamp >= the given one (None when there is none)."""
        found = list_offsets(self._metadata, dict(timestamps))
        return {tp: (o if o >= 0 else None) for tp, (o, _) in found.items()}

    def partitions_for_topic(self, topic: str) -> set[int]:
        cluster = self._metadata.cluster
        if cluster.partition_count(topic) is None:
            cluster = self._metadata.refresh({topic})
        return set(cluster.partitions_for(topic))

    def topics(self) -> set[str]:
        cluster = self._metadata.refresh(None, allow_auto_create=False)
        return set(cluster.partitions) - set(cluster.internal)

    # ---- commits ------------------------------------------------------------------------

    def _group(self) -> GroupDriver[Any]:
        if self._coordinator is None:
            raise IllegalStateError("offset commits need a group_id")
        return self._coordinator

    @staticmethod
    def _offsets(offsets: Mapping[TopicPartition, Any]) -> dict[TopicPartition, Any]:
        out: dict[TopicPartition, Any] = {}
        for tp, v in offsets.items():
            tp = TopicPartition(*tp)
            out[tp] = v if isinstance(v, int) else (int(v[0]), v[1] if len(v) > 1 else "")
        return out

    def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commit ``offsets`` (default: current positions) and wait.

        Values are the next offset to consume (an int, or ``(offset, metadata)``).
        Raises :class:`CommitFailedError` if the group rebalanced meanwhile.
        """
        group = self._group()
        data = self._subs.consumed() if offsets is None else self._offsets(offsets)
        group.commit_sync(data, self.config["default_api_timeout_ms"] / 1000,
                          interruptible=True)

    def commit_async(self, offsets: Mapping[TopicPartition, Any] | None = None,
                     callback: Callable[[dict[TopicPartition, Any], BaseException | None],
                                        None] | None = None) -> Future[None]:
        """Commit without waiting; ``callback(offsets, exception)`` runs in a later poll."""
        group = self._group()
        data = self._subs.consumed() if offsets is None else self._offsets(offsets)
        if not group.coordinator_known:
            group.ensure_coordinator(self._clock.now() + 5)
        fut = group.send_commit(data)
        if callback is not None:
            fut.add_done_callback(
                lambda f: self._async_callbacks.append((callback, data, f.exception())))
        return fut

    def _run_async_callbacks(self) -> None:
        while self._async_callbacks:
            cb, data, exc = self._async_callbacks.pop(0)
            cb(data, exc)

    def committed(self, partition: TopicPartition | Iterable[TopicPartition]
                  ) -> Any:
        """Committed offset of a partition (None if none); a dict for several partitions."""
        group = self._group()
        timeout = self.config["default_api_timeout_ms"] / 1000
        if isinstance(partition, TopicPartition):
            got = group.fetch_committed([partition], timeout).get(partition)
            return None if got is None else got.offset
        parts = [TopicPartition(*tp) for tp in partition]
        return {tp: (None if o is None else o.offset)
                for tp, o in group.fetch_committed(parts, timeout).items()}

    def committed_metadata(self, partition: TopicPartition) -> OffsetAndMetadata | None:
        return self._group().fetch_committed(
            [partition], self.config["default_api_timeout_ms"] / 1000).get(partition)

    # ---- lifecycle ----------------------------------------------------------------------

    def close(self, autocommit: bool = True, leave_group: bool = True) -> None:
        """Commit (if auto-commit is on), leave the group and close connections.

        ``leave_group=False`` closes without LeaveGroup (Kafka's ``REMAIN_IN_GROUP``, KIP-1092):
        the group keeps the member, and its partitions, until its session times out.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._coordinator is not None:
                self._coordinator.close(commit=autocommit, leave_group=leave_group)
            self._run_async_callbacks()
        finally:
            self._net.close()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("consumer is closed")

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def member_state(self) -> str:
        """UNJOINED, REBALANCING or STABLE (for tools and tests); with
        ``group_protocol="consumer"`` Kafka's member states (JOINING, RECONCILING, STABLE...)."""
        return "UNJOINED" if self._coordinator is None else self._coordinator.state

    @property
    def member_id(self) -> str:
        return NO_MEMBER_ID if self._coordinator is None else self._coordinator.member_id

    @property
    def generation(self) -> int:
        return NO_GENERATION if self._coordinator is None else self._coordinator.generation

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation (or member epoch), member id and instance id, for
        ``Producer.send_offsets_to_transaction`` (Kafka's ``groupMetadata()``); raises
        without a ``group_id``."""
        group_id = self.config["group_id"]
        if group_id is None:
            raise IllegalStateError("group_metadata needs a consumer with a group_id")
        return ConsumerGroupMetadata(group_id, self.generation, self.member_id,
                                     self.config["group_instance_id"])

    @property
    def rejoin_pending(self) -> bool:
        """True while the member still has to (re)join: not yet settled in its generation."""
        return self._coordinator is not None and self._coordinator.needs_rejoin()

    def group_status(self) -> MemberStatus | None:
        """A snapshot of the group member (None without a ``group_id``): coordinator,
        heartbeats, recent history. For tools, logs and tests."""
        return None if self._coordinator is None else self._coordinator.status()

    @property
    def network_alive(self) -> bool:
        """True while the network thread runs (until :meth:`close`)."""
        return self._net.running


