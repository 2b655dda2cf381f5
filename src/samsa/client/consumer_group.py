"""The driver of a KIP-848 ``consumer`` group member: ``Consumer(group_protocol="consumer")``.

It runs :class:`~samsa.client.consumer_membership.ConsumerMembership` over the network with
the classic driver's parts where they fit: :mod:`~samsa.client.discovery` (FindCoordinator),
:mod:`~samsa.client.listeners` (partition changes and the user's listener, always
incremental here), :mod:`~samsa.client.commits` (OffsetCommit v9 with the member id and
epoch) and :mod:`~samsa.client.clock`. Its own parts:

* :class:`CgMember`: the machine behind its lock, the clock and the network (what
  :class:`~samsa.client.member.MemberContext` is to the classic machine);
* :class:`CgHeartbeatThread`: sends ConsumerGroupHeartbeat whenever the machine says so
  (the interval comes from the coordinator; at once when joining or acknowledging); the
  network thread applies the answers;
* :class:`ConsumerProtocolCoordinator`: the user thread's side (``Consumer.poll`` resolves
  topic ids through metadata and reconciles: commit, revoke, assign; ``unsubscribe`` and
  ``close`` leave with epoch -1, static members -2).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.commits import OffsetAndMetadata, OffsetCommitter
from samsa.client.consumer_membership import (
    CgAction,
    ConsumerMembership,
    ConsumerMembershipConfig,
    HeartbeatRequest,
    Reconcile,
    SendConsumerHeartbeat,
)
from samsa.client.discovery import CoordinatorDiscovery
from samsa.client.errors import KafkaError, KafkaTimeoutError, WakeupError, error_for
from samsa.client.future import Future
from samsa.client.listeners import ASSIGNED, PartitionChanges
from samsa.client.member import LEAVE_TIMEOUT_S, MemberStatus
from samsa.client.membership import FindCoordinator, LosePartitions, RaiseError, RevokePartitions
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey
from samsa.client.subscription import SubscriptionState, SubscriptionType

__all__ = [
    "GROUP_PROTOCOLS",
    "CgHeartbeatThread",
    "CgMember",
    "ConsumerProtocolCoordinator",
    "check_group_protocol",
    "heartbeat_body",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

GROUP_PROTOCOLS = ("classic", "consumer")

CONSUMER_PROTOCOL_UNSUPPORTED = ("partition_assignment_strategy", "heartbeat_interval_ms",
                                 "session_timeout_ms")
"""Settings a ``consumer`` group member may not set: the broker assigns partitions and
decides the session timeout and heartbeat interval (Kafka's ConsumerConfig refuses them)."""

OFFSET_COMMIT_VERSION = 9
"""OffsetCommit v9: the version a consumer-protocol member must commit with (its
``generation_id_or_member_epoch`` is the member epoch)."""


def check_group_protocol(configs: Mapping[str, Any]) -> str:
    """Validate ``group_protocol`` and the settings that go with it (as Kafka's
    ``ConsumerConfig`` does); the protocol, lower case."""
    protocol = str(configs.get("group_protocol") or "classic").lower()
    if protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"group_protocol must be 'classic' or 'consumer', not "
                         f"{configs.get('group_protocol')!r}")
    assignor = configs.get("group_remote_assignor")
    if protocol == "classic" and assignor is not None:
        raise ValueError("group_remote_assignor cannot be set when group_protocol='classic' "
                         "(classic members assign partitions themselves: use "
                         "partition_assignment_strategy)")
    if protocol == "consumer":
        given = [k for k in CONSUMER_PROTOCOL_UNSUPPORTED if configs.get(k) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} cannot be set when group_protocol="
                             "'consumer': the broker assigns the partitions (choose its "
                             "assignor with group_remote_assignor) and sets the session "
                             "timeout and heartbeat interval")
        if assignor is not None and (not isinstance(assignor, str) or not assignor):
            raise ValueError("group_remote_assignor must be the name of a broker assignor "
                             "('uniform', 'range') or None for the broker's default")
    return protocol


def heartbeat_body(group_id: str, req: HeartbeatRequest) -> dict[str, Any]:
    """The ConsumerGroupHeartbeat request body of ``req`` (None: unchanged)."""
    return {
        "group_id": group_id,
        "member_id": req.member_id,
        "member_epoch": req.member_epoch,
        "instance_id": req.instance_id,
        "rack_id": req.rack_id,
        "rebalance_timeout": -1 if req.rebalance_timeout_ms is None
        else req.rebalance_timeout_ms,
        "subscribed_topic_names": None if req.subscribed_topic_names is None
        else list(req.subscribed_topic_names),
        "subscribed_topic_regex": req.subscribed_topic_regex,
        "server_assignor": req.server_assignor,
        "topic_partitions": None if req.topic_partitions is None
        else [{"topic_id": tid, "partitions": list(ps)} for tid, ps in req.topic_partitions],
    }


def _millis(value: Any) -> int:
    if hasattr(value, "total_seconds"):
        return round(float(value.total_seconds()) * 1000)
    return int(value)


class CgMember:
    """The consumer protocol's machine, its lock, and the I/O the driver's parts use."""

    def __init__(self, metadata: Metadata, subs: SubscriptionState,
                 config: ConsumerMembershipConfig, *, client_id: str, auto_commit: bool,
                 clock: Clock, wakeup_flag: Callable[[], bool]) -> None:
        self.metadata = metadata
        self.net = metadata.net
        self.subs = subs
        self.config = config
        self.client_id = client_id
        self.clock = clock
        self.machine = ConsumerMembership(config, auto_commit=auto_commit)
        self.lock = threading.RLock()
        self._woken = wakeup_flag
        self.machine.poll(self.now_ms())  # the poll timer starts now

    @property
    def group_id(self) -> str:
        return self.config.group_id

    def now_ms(self) -> float:
        return self.clock.now() * 1000.0

    def coordinator_dest(self) -> tuple[str, int | None]:
        return ("coordinator", self.machine.coordinator)

    def coordinator_dead(self, reason: str) -> None:
        with self.lock:
            self.machine.coordinator_dead(reason, self.now_ms())

    def check_wakeup(self) -> None:
        if self._woken():
            raise WakeupError("wakeup() called")

    def raise_fatal(self) -> None:
        fatal = self.machine.fatal
        if fatal is not None:
            raise error_for(fatal.code, fatal.message)

    def result(self, fut: Future[T], seconds: float) -> T:
        if not self.clock.wait(fut, seconds):
            raise KafkaTimeoutError(f"no result within {seconds:.1f}s")
        return fut.result(0)

    def send_heartbeat(self, req: HeartbeatRequest,
                       on_done: Callable[[], None] = lambda: None) -> Future[Any]:
        """Send ``req``; the network thread applies its answer to the machine."""
        m = self.machine
        fut = self.net.send(self.coordinator_dest(), ApiKey.CONSUMER_GROUP_HEARTBEAT,
                            heartbeat_body(self.group_id, req))

        def done(f: Future[Any]) -> None:
            with self.lock:
                now = self.now_ms()
                if f.failed():
                    m.on_heartbeat_failed(req, str(f.exception()), now)
                else:
                    r = f.value
                    assignment = None
                    if r.assignment is not None:
                        assignment = {t.topic_id: set(t.partitions)
                                      for t in r.assignment.topic_partitions}
                    m.on_heartbeat_response(
                        req, now, int(r.error_code), message=r.error_message,
                        member_id=r.member_id, member_epoch=int(r.member_epoch),
                        heartbeat_interval_ms=_millis(r.heartbeat_interval),
                        assignment=assignment)
            on_done()

        fut.add_done_callback(done)
        return fut

    def send_leave(self, req: HeartbeatRequest | None) -> None:
        """Send the leave heartbeat from the user thread and wait (briefly) for it."""
        if req is None or self.machine.coordinator is None:
            return
        self.clock.wait(self.send_heartbeat(req), LEAVE_TIMEOUT_S)


class CgHeartbeatThread:
    """Heartbeats of a consumer-protocol member; never blocks on the network."""

    def __init__(self, member: CgMember, discovery: CoordinatorDiscovery) -> None:
        self.member = member
        self.discovery = discovery
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"samsa-heartbeat-{self.member.client_id}")
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def run_once(self) -> float:
        """One round: what is due; the seconds to wait before the next round."""
        m = self.member
        with m.lock:
            now = m.now_ms()
            actions = m.machine.heartbeat_tick(now)
        for action in actions:
            if isinstance(action, SendConsumerHeartbeat):
                if m.machine.coordinator is not None:
                    m.send_heartbeat(action.request, self.wake)
            elif isinstance(action, FindCoordinator):
                self.discovery.start()
        with m.lock:
            delay = m.machine.heartbeat_delay(m.now_ms())
        return max(0.002, min(delay / 1000, 0.5))

    def _run(self) -> None:
        while not self._stopped.is_set():
            pause = self.run_once()
            self.member.clock.wait(self._wake, pause)
            self._wake.clear()


class CgCommitter(OffsetCommitter):
    """Commits with OffsetCommit v9 (member id and epoch); ``commit_sync`` retries
    STALE_MEMBER_EPOCH with the member's latest epoch while it stays in the group."""

    def _commit_body(self, offsets: Mapping[TopicPartition, Any],
                     identity: tuple[int, str]) -> dict[str, Any]:
        body = super()._commit_body(offsets, identity)
        body["__version__"] = OFFSET_COMMIT_VERSION
        return body

    def commit_sync(self, offsets: Mapping[TopicPartition, Any], timeout_s: float,
                    interruptible: bool = False) -> None:
        m = self.member
        deadline = m.clock.now() + timeout_s
        while True:
            try:
                super().commit_sync(offsets, max(0.1, deadline - m.clock.now()), interruptible)
                return
            except KafkaError as exc:
                if exc.code != ErrorCode.stale_member_epoch or m.clock.now() >= deadline:
                    raise
                log.debug("commit with a stale member epoch, retrying: %s", exc)
                m.clock.sleep(m.config.retry_backoff_ms / 1000)


class ConsumerProtocolCoordinator:
    """Group membership, heartbeats and offset commits of a ``consumer`` group member
    (the classic protocol's is :class:`~samsa.client.coordinator.ConsumerCoordinator`;
    both offer ``Consumer`` the same methods)."""

    def __init__(self, metadata: Metadata, subs: SubscriptionState, *, group_id: str,
                 group_instance_id: str | None, rebalance_timeout_ms: int,
                 server_assignor: str | None, rack: str | None, retry_backoff_ms: int,
                 client_id: str, auto_commit: bool, auto_commit_interval_ms: int,
                 wakeup_flag: Callable[[], bool],
                 on_assignment_changed: Callable[[set[TopicPartition]], None] = lambda _: None,
                 clock: Clock = SYSTEM_CLOCK, member_id: str | None = None) -> None:
        config = ConsumerMembershipConfig(
            group_id=group_id, member_id=member_id or str(uuid.uuid4()),
            group_instance_id=group_instance_id, rack_id=rack,
            rebalance_timeout_ms=rebalance_timeout_ms, server_assignor=server_assignor,
            retry_backoff_ms=retry_backoff_ms)
        self.member = CgMember(metadata, subs, config, client_id=client_id,
                               auto_commit=auto_commit, clock=clock, wakeup_flag=wakeup_flag)
        self.discovery = CoordinatorDiscovery(self.member, on_found=self._on_found)
        self.heartbeat = CgHeartbeatThread(self.member, self.discovery)
        self.commits = CgCommitter(self.member, self.discovery, auto_commit=auto_commit,
                                   auto_commit_interval_ms=auto_commit_interval_ms)
        self.changes = PartitionChanges(subs, cooperative=True,
                                        on_removed=on_assignment_changed)
        self._next_resolve = 0.0

    def _on_found(self) -> None:
        self.heartbeat.wake()

    @property
    def group_id(self) -> str:
        return self.member.group_id

    # ---- the user's poll ------------------------------------------------------------------

    def poll(self, deadline: float) -> bool:
        """Once per ``Consumer.poll``: release or reconcile partitions; True when stable."""
        m = self.member
        with m.lock:
            m.machine.poll(m.now_ms())
        self.heartbeat.wake()
        if not m.subs.auto_assigned:
            m.raise_fatal()
            self.commits.maybe_auto_commit(m.now_ms())
            return True
        self.heartbeat.start()
        if m.machine.coordinator is None and m.machine.fatal is None and \
                m.machine.in_group() and not self.discovery.ensure(deadline):
            return False
        self.user_steps()
        self.commits.maybe_auto_commit(m.now_ms())
        return not m.machine.needs_rejoin()

    def _names(self) -> dict[Any, str]:
        m = self.member
        names = m.metadata.cluster.topic_names
        with m.lock:
            missing = m.machine.unresolved(names)
        now = m.clock.now()
        if missing and now >= self._next_resolve:
            self._next_resolve = now + m.config.retry_backoff_ms / 1000
            topics = None if m.subs.type == SubscriptionType.PATTERN else m.subs.topics
            try:
                names = m.metadata.refresh(topics, 5.0).topic_names
                if any(t not in names for t in missing) and topics is not None:
                    names = m.metadata.refresh(None, 5.0).topic_names
            except KafkaError as exc:
                log.debug("metadata refresh for assigned topic ids failed: %s", exc)
        return names

    def user_steps(self) -> None:
        """The user thread's part of the protocol (``poll`` runs it): release lost
        partitions, raise a fatal error, reconcile a new assignment."""
        m = self.member
        for _ in range(10):  # bounded: each step waits for nothing
            names = self._names()
            with m.lock:
                actions = m.machine.user_step(m.now_ms(), names, frozenset(m.subs.assignment))
            if not actions:
                return
            for action in actions:
                self._perform(action)

    def _perform(self, action: CgAction) -> None:
        m = self.member
        if isinstance(action, RaiseError):
            m.raise_fatal()
        elif isinstance(action, LosePartitions):
            try:
                self.changes.lose(action.partitions)
            finally:
                with m.lock:
                    m.machine.released(m.now_ms())
                self.heartbeat.wake()
        elif isinstance(action, Reconcile):
            self._reconcile(action)

    def _valid(self, plan: Reconcile) -> bool:
        with self.member.lock:
            return self.member.machine.reconcile_valid(plan)

    def _reconcile(self, plan: Reconcile) -> None:
        """Commit (auto-commit), revoke, assign, each only while the plan still holds;
        then the machine acknowledges with the next heartbeat."""
        m = self.member
        ok = False
        try:
            if plan.commit:
                self.commits.commit_before_revoke()
            if self._valid(plan) and plan.revoked:
                self.changes.revoke(plan.revoked)
            if self._valid(plan):
                self.changes.assign(plan.assignment)
                self.commits.restart_auto_commit_timer()
                self.changes.call(ASSIGNED, plan.added)
            ok = True
        finally:
            with m.lock:
                m.machine.reconciled(plan, m.now_ms(), ok)
            self.heartbeat.wake()

    def request_rejoin(self, reason: str) -> None:
        """The subscription changed: join with it, or send it with the next heartbeat."""
        m = self.member
        pattern = m.subs.pattern.pattern if m.subs.type == SubscriptionType.PATTERN and \
            m.subs.pattern is not None else None
        with m.lock:
            m.machine.subscribe(m.subs.topics, pattern)
        self.heartbeat.wake()

    def check_metadata(self) -> None:
        """Nothing to do: the coordinator follows topics and partitions (and patterns)."""

    def ensure_coordinator(self, deadline: float) -> bool:
        return self.discovery.ensure(deadline)

    # ---- offsets ----------------------------------------------------------------------------

    def send_commit(self, offsets: Mapping[TopicPartition, Any]) -> Future[None]:
        return self.commits.send_commit(offsets)

    def commit_sync(self, offsets: Mapping[TopicPartition, Any], timeout_s: float,
                    interruptible: bool = False) -> None:
        self.commits.commit_sync(offsets, timeout_s, interruptible)

    def fetch_committed(self, partitions: Sequence[TopicPartition], timeout_s: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self.commits.fetch_committed(partitions, timeout_s)

    def poll_committed(self, partitions: Sequence[TopicPartition], deadline: float
                       ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        return self.commits.poll_committed(partitions, deadline)

    # ---- queries ----------------------------------------------------------------------------

    @property
    def coordinator_known(self) -> bool:
        return self.member.machine.coordinator is not None

    @property
    def member_id(self) -> str:
        return self.member.machine.member_id

    @property
    def generation(self) -> int:
        """The member epoch."""
        return self.member.machine.member_epoch

    @property
    def state(self) -> str:
        """Kafka's member state: UNSUBSCRIBED, JOINING, RECONCILING, ACKNOWLEDGING, STABLE,
        FENCED, PREPARE_LEAVING, LEAVING, STALE or FATAL."""
        return self.member.machine.state.value

    def needs_rejoin(self) -> bool:
        return self.member.machine.needs_rejoin()

    def status(self) -> MemberStatus:
        m = self.member
        with m.lock:
            machine = m.machine
            return MemberStatus(
                state=machine.state.value, member_id=machine.member_id,
                generation=machine.member_epoch, rejoin_pending=machine.needs_rejoin(),
                coordinator=machine.coordinator,
                heartbeat_in_flight=machine.heartbeat_in_flight,
                since_heartbeat_ok_ms=m.now_ms() - machine.last_heartbeat_ok,
                heartbeat_thread_alive=self.heartbeat.is_alive(),
                history=tuple(machine.history))

    # ---- leaving ----------------------------------------------------------------------------

    def unsubscribe(self) -> None:
        """Revoke (lost, if fenced) the partitions, then leave with epoch -1 (static: -2)."""
        m = self.member
        with m.lock:
            actions = m.machine.prepare_leave(frozenset(m.subs.assignment))
        try:
            for action in actions:
                if isinstance(action, RevokePartitions):
                    self.changes.revoke(action.partitions)
                elif isinstance(action, LosePartitions):
                    self.changes.lose(action.partitions)
        finally:
            with m.lock:
                request = m.machine.leave_request(m.now_ms())
            m.send_leave(request)

    def close(self, commit: bool, timeout_s: float = 10.0, leave_group: bool = True) -> None:
        """Commit (``commit`` and auto-commit on), leave (``leave_group``; a static member
        leaves with epoch -2 either way), stop the heartbeat thread."""
        m = self.member
        try:
            if commit and self.commits.auto_commit:
                offsets = m.subs.consumed()
                if offsets and m.group_id:
                    try:
                        self.commits.commit_sync(offsets, timeout_s)
                    except KafkaError as exc:
                        log.info("final auto-commit failed: %s", exc)
            if m.subs.auto_assigned:
                if leave_group:
                    self.unsubscribe()
                else:
                    with m.lock:
                        request = m.machine.static_leave_request(m.now_ms())
                    m.send_leave(request)
        finally:
            self.heartbeat.stop()
