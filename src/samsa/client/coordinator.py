"""The consumer's coordinator driver: runs :class:`Membership` over the network.

The user thread calls :meth:`ConsumerCoordinator.poll` (find coordinator, join, sync, run
listener callbacks, auto-commit) and the commit/offset methods; a background heartbeat
thread calls :meth:`Membership.heartbeat_tick`. Both take ``self.lock`` only around the state
machine, never while waiting on the network or running user callbacks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from samsa import TopicPartition
from samsa.assignors import (
    Assignment,
    Assignor,
    ClusterView,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from samsa.client.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    KafkaError,
    KafkaTimeoutError,
    WakeupError,
    error_for,
)
from samsa.client.future import Future
from samsa.client.membership import (
    NETWORK_EXCEPTION,
    Action,
    AssignPartitions,
    CommitOffsets,
    FindCoordinator,
    JoinedMember,
    LosePartitions,
    Membership,
    MembershipConfig,
    PerformAssignment,
    RaiseError,
    RevokePartitions,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
)
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey
from samsa.client.subscription import SubscriptionState

__all__ = ["ConsumerCoordinator", "OffsetAndMetadata"]

log = logging.getLogger(__name__)

_COMMIT_REJOIN = {22, 25, 27}


class OffsetAndMetadata(tuple[int, str]):
    """(offset, metadata) as committed."""

    __slots__ = ()

    def __new__(cls, offset: int, metadata: str = "") -> OffsetAndMetadata:
        return super().__new__(cls, (offset, metadata))

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def metadata(self) -> str:
        return self[1]


class ConsumerCoordinator:
    """Group membership, heartbeats and offset commits for one consumer."""

    def __init__(self, metadata: Metadata, subs: SubscriptionState, config: MembershipConfig,
                 assignors: Sequence[Assignor], *, client_id: str, auto_commit: bool,
                 auto_commit_interval_ms: int, rack: str | None,
                 wakeup_flag: Callable[[], bool], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.metadata = metadata
        self.net = metadata.net
        self.subs = subs
        self.config = config
        self.assignors = list(assignors)
        self.client_id = client_id
        self.rack = rack
        self.clock = clock
        """Seconds (monotonic); every deadline given to this class is on this clock."""
        self._sleep = sleep
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval_ms
        self.next_auto_commit = self._now() + auto_commit_interval_ms
        self.machine = Membership(config, auto_commit=auto_commit)
        self.machine.last_poll = self._now()
        self.lock = threading.RLock()
        self._woken = wakeup_flag
        self._closed = threading.Event()
        self._hb_wake = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._find_future: Future[Any] | None = None
        self._in_flight: dict[Action, Future[Any]] = {}
        self._resume: list[Action] = []
        self.joined_snapshot: dict[str, int] = {}
        self.on_assignment_changed: Callable[[set[TopicPartition]], None] = lambda _: None

    def _now(self) -> float:
        return self.clock() * 1000.0

    @property
    def group_id(self) -> str:
        return self.config.group_id

    # ---- coordinator lookup -----------------------------------------------------------

    def _coordinator_dest(self) -> Any:
        return ("coordinator", self.machine.coordinator)

    def ensure_coordinator(self, deadline: float) -> bool:
        """Find the coordinator (blocking until ``deadline``, :attr:`clock` seconds)."""
        while self.machine.coordinator is None:
            self._check_wakeup()
            self._raise_fatal()
            if self.clock() >= deadline:
                return False
            now = self._now()
            if now < self.machine.retry_at:
                self._sleep(min((self.machine.retry_at - now) / 1000, 0.1))
                continue
            self.lookup_coordinator(deadline)
        return True

    def lookup_coordinator(self, deadline: float) -> None:
        """Send FindCoordinator (or keep waiting for the one in flight) until ``deadline``.

        The request gets the full request timeout and survives short polls: it shares the
        broker connection with long-polling fetches, so a short timeout would never do.
        """
        fut = self._start_lookup()
        while not fut.wait(0.05):
            self._check_wakeup()
            if self.clock() >= deadline:
                return
        self._run_actions(self._apply_lookup(fut), deadline)

    def _start_lookup(self) -> Future[Any]:
        """The FindCoordinator in flight, sent now if there is none (from either thread).

        Its answer is applied once, by whichever comes first: the network thread's callback
        (so the heartbeat thread never blocks on it) or the user thread waiting for it.
        """
        with self.lock:
            fut = self._find_future
            if fut is None:
                body: dict[str, Any] = {"key": self.group_id, "key_type": 0,
                                        "coordinator_keys": [self.group_id]}
                fut = self._find_future = self.net.send(self.metadata.any_node(),
                                                        ApiKey.FIND_COORDINATOR, body)
                fut.add_done_callback(self._on_lookup_done)
        return fut

    def _on_lookup_done(self, fut: Future[Any]) -> None:
        self._apply_lookup(fut)  # a fatal error stays in the machine for the next poll

    def _apply_lookup(self, fut: Future[Any]) -> list[Action]:
        with self.lock:
            if self._find_future is not fut:
                return []  # already applied
            self._find_future = None
            now = self._now()
            if fut.failed():
                log.debug("FindCoordinator failed: %s", fut.exception())
                return self.machine.coordinator_lookup_failed(
                    NETWORK_EXCEPTION, now, f"FindCoordinator: {fut.exception()}")
            resp = fut.value
            if hasattr(resp, "coordinators"):
                c = resp.coordinators[0]
                code, node, host, port = int(c.error_code), int(c.node_id), c.host, int(c.port)
            else:
                code, node, host, port = (int(resp.error_code), int(resp.node_id), resp.host,
                                          int(resp.port))
            if code:
                return self.machine.coordinator_lookup_failed(code, now,
                                                              f"FindCoordinator error {code}")
            self.net.set_address(("coordinator", node), host, port)
            self.machine.coordinator_found(node, now)
            self._hb_wake.set()  # heartbeat at once if one is due
            return []

    # ---- join / sync ------------------------------------------------------------------

    def poll(self, deadline: float) -> bool:
        """Once per ``Consumer.poll``: keep membership alive; True when stable."""
        now = self._now()
        with self.lock:
            self.machine.poll(now)
        self._raise_fatal()
        if not self.subs.auto_assigned:
            self.maybe_auto_commit(now)
            return True
        self._start_heartbeat_thread()
        if self.machine.coordinator is None and self.machine.fatal is None and \
                not self.ensure_coordinator(deadline):
            return False  # heartbeats need it too, also while stable
        if self.machine.needs_rejoin() and not self.ensure_active_group(deadline):
            return False
        self.maybe_auto_commit(self._now())
        return True

    def _raise_fatal(self) -> None:
        fatal = self.machine.fatal
        if fatal is not None:
            if fatal.code == 82:
                raise FencedInstanceIdError(fatal.message)
            raise error_for(fatal.code, fatal.message)

    def ensure_active_group(self, deadline: float) -> bool:
        """Run the join loop until the member is stable or ``deadline`` passes.

        A ``wakeup()`` while JoinGroup or SyncGroup is in flight raises WakeupError but keeps
        the request: the next call resumes waiting for the same response, as Kafka does.
        """
        while True:
            self._check_wakeup()
            if self._resume:
                actions, self._resume = self._resume, []
            else:
                with self.lock:
                    actions = self.machine.next_step(self._now())
                    stable = not self.machine.needs_rejoin()
                if stable:
                    return True
            if not actions:
                if self.clock() >= deadline:
                    return False
                self._sleep(0.01)
                continue
            try:
                self._run_actions(actions, deadline)
            except WakeupError:
                if not self._resume:
                    with self.lock:
                        self.machine.abort_rebalance()
                raise
            except BaseException:
                with self.lock:
                    self.machine.abort_rebalance()
                raise
            if self.clock() >= deadline and self.machine.needs_rejoin():
                return False

    def _run_actions(self, actions: list[Action], deadline: float) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            try:
                more = self._perform(action, deadline)
            except WakeupError:
                if action in self._in_flight:  # a join/sync response is still coming
                    self._resume = [action, *queue]
                raise
            queue[:0] = more

    def _perform(self, action: Action, deadline: float) -> list[Action]:
        if isinstance(action, FindCoordinator):
            self.lookup_coordinator(deadline)
            return []
        if isinstance(action, RaiseError):
            self._raise_fatal()
            return []
        if isinstance(action, CommitOffsets):
            self._commit_before_revoke(action)
            return []
        if isinstance(action, RevokePartitions):
            try:
                self._invoke_listener("on_partitions_revoked", action.partitions)
            finally:  # the machine no longer owns them, whatever the listener did
                if not self.config.cooperative:
                    self.subs.set_assignment(())
                else:
                    keep = [tp for tp in self.subs.assignment if tp not in action.partitions]
                    self.subs.set_assignment(keep)
                self.on_assignment_changed(set(action.partitions))
            return []
        if isinstance(action, LosePartitions):
            self.subs.set_assignment(())
            self.on_assignment_changed(set(action.partitions))
            self._invoke_listener("on_partitions_lost", action.partitions)
            return []
        if isinstance(action, AssignPartitions):
            return self._on_assigned(action)
        if isinstance(action, SendJoinGroup):
            return self._join(action, deadline)
        if isinstance(action, PerformAssignment):
            return self._perform_assignment(action)
        if isinstance(action, SendSyncGroup):
            return self._sync(action, deadline)
        if isinstance(action, SendLeaveGroup):
            self._send_leave(action)
            return []
        if isinstance(action, SendHeartbeat):
            self._send_heartbeat(action)
            return []
        raise AssertionError(f"unknown action {action!r}")

    def _protocols(self) -> list[dict[str, Any]]:
        topics = sorted(self.subs.topics)
        owned = list(self.subs.assignment) if self.config.cooperative else []
        generation = self.machine.generation
        return [{"name": a.name,
                 "metadata": encode_subscription(a.metadata(topics, owned=owned,
                                                            generation=generation,
                                                            rack=self.rack))}
                for a in self.assignors]

    def _join(self, action: SendJoinGroup, deadline: float) -> list[Action]:
        body: dict[str, Any] = {}
        if action not in self._in_flight:  # not resuming after a wakeup
            if self.subs.type.name == "PATTERN":
                self._match_pattern()
            body = {
                "group_id": self.group_id,
                "session_timeout": self.config.session_timeout_ms,
                "rebalance_timeout": self.config.rebalance_timeout_ms,
                "member_id": action.member_id,
                "group_instance_id": self.config.group_instance_id,
                "protocol_type": "consumer",
                "protocols": self._protocols(),
                "reason": action.reason,
            }
            self.joined_snapshot = self._snapshot()
        resp = self._send_group_request(action, ApiKey.JOIN_GROUP, body)
        now = self._now()
        with self.lock:
            if resp is None:
                self.machine.coordinator_dead("JoinGroup failed", now)
                return self.machine.on_join_response(NETWORK_EXCEPTION, now)
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, bytes(m.metadata))
                            for m in resp.members)
            return self.machine.on_join_response(
                int(resp.error_code), now, generation=int(resp.generation_id),
                member_id=resp.member_id, protocol=resp.protocol_name,
                leader_id=resp.leader, members=members,
                skip_assignment=bool(getattr(resp, "skip_assignment", False)))

    def _send_group_request(self, action: Action, api: int, body: dict[str, Any]) -> Any:
        """Send (or resume waiting for) the JoinGroup/SyncGroup of ``action``."""
        fut = self._in_flight.get(action)
        if fut is None:
            fut = self._in_flight[action] = self.net.send(
                self._coordinator_dest(), api, body,
                timeout_ms=self.config.rebalance_timeout_ms + 5000)
        while not fut.wait(0.05):
            self._check_wakeup()
        del self._in_flight[action]
        return self._wait(fut)

    def _wait(self, fut: Future[Any]) -> Any:
        """The response of a completed request; None on a network failure."""
        if fut.failed():
            log.debug("group request failed: %s", fut.exception())
            return None
        return fut.value

    def _perform_assignment(self, action: PerformAssignment) -> list[Action]:
        assignor = next((a for a in self.assignors if a.name == action.protocol), None)
        if assignor is None:
            with self.lock:
                self.machine.fatal = RaiseError(-1, f"coordinator chose unknown assignor "
                                                    f"{action.protocol!r}")
            self._raise_fatal()
        assert assignor is not None
        subscriptions = {m.member_id: decode_subscription(m.metadata, m.group_instance_id)
                         for m in action.members}
        all_topics = {t for s in subscriptions.values() for t in s.topics}
        cluster = self.metadata.refresh(all_topics | set(self.subs.topics))
        counts = {t: n for t in all_topics if (n := cluster.partition_count(t) or 0) > 0}
        # Replica racks matter only to rack-aware assignors, and only when members have racks.
        racked = any(s.rack_id for s in subscriptions.values())
        view = ClusterView(counts, {t: cluster.partition_racks(t) for t in counts} if racked
                           else {})
        result = assignor.assign(view, subscriptions)
        encoded = {member: encode_assignment(result.get(member, Assignment(())))
                   for member in subscriptions}
        with self.lock:
            return self.machine.on_assignment_computed(encoded)

    def _sync(self, action: SendSyncGroup, deadline: float) -> list[Action]:
        body = {
            "group_id": self.group_id,
            "generation_id": action.generation,
            "member_id": action.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": "consumer",
            "protocol_name": action.protocol,
            "assignments": [{"member_id": m, "assignment": a} for m, a in action.assignments],
        }
        resp = self._send_group_request(action, ApiKey.SYNC_GROUP, body)
        now = self._now()
        with self.lock:
            if resp is None:
                self.machine.coordinator_dead("SyncGroup failed", now)
                return self.machine.on_sync_response(NETWORK_EXCEPTION, now, action.generation)
            code = int(resp.error_code)
            partitions: frozenset[TopicPartition] = frozenset()
            if code == 0:
                assignment = decode_assignment(bytes(resp.assignment or b""))
                partitions = frozenset(TopicPartition(*tp) for tp in assignment.partitions)
                assignor = next((a for a in self.assignors if a.name == action.protocol), None)
                if assignor is not None:
                    assignor.on_assignment(assignment, action.generation)
            return self.machine.on_sync_response(code, now, action.generation, partitions)

    def _on_assigned(self, action: AssignPartitions) -> list[Action]:
        self.subs.set_assignment(action.assignment)
        if any(tp.topic not in self.subs.topics for tp in action.assignment):
            with self.lock:
                self.machine.request_rejoin("assignment does not match the subscription")
        self.next_auto_commit = self._now() + self.auto_commit_interval
        self._invoke_listener("on_partitions_assigned", action.added)
        return []

    def _invoke_listener(self, name: str, partitions: frozenset[TopicPartition]) -> None:
        listener = self.subs.listener
        if listener is None:
            return
        if name == "on_partitions_lost" and not hasattr(listener, name):
            name = "on_partitions_revoked"
        if name != "on_partitions_assigned" and not partitions:
            return
        method = getattr(listener, name, None)
        if method is not None:
            method(set(partitions))

    def _send_leave(self, action: SendLeaveGroup) -> None:
        if self.machine.coordinator is None:
            return
        body = {"group_id": self.group_id, "member_id": action.member_id,
                "members": [{"member_id": action.member_id,
                             "group_instance_id": self.config.group_instance_id,
                             "reason": action.reason}]}
        fut = self.net.send(self._coordinator_dest(), ApiKey.LEAVE_GROUP, body, timeout_ms=5000)
        fut.wait(5)

    # ---- heartbeats ---------------------------------------------------------------------

    def _start_heartbeat_thread(self) -> None:
        if self._hb_thread is None:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"samsa-heartbeat-{self.client_id}")
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._closed.is_set():
            with self.lock:
                now = self._now()
                actions = self.machine.heartbeat_tick(now)
                delay = self.machine.heartbeat_delay(now)
            for action in actions:
                if isinstance(action, SendHeartbeat):
                    self._send_heartbeat(action)
                elif isinstance(action, FindCoordinator):
                    self._start_lookup()
                elif isinstance(action, SendLeaveGroup):
                    self._send_leave(action)
            self._hb_wake.wait(max(0.005, min(delay / 1000, 0.5)))
            self._hb_wake.clear()

    def _send_heartbeat(self, action: SendHeartbeat) -> None:
        body = {"group_id": self.group_id, "generation_id": action.generation,
                "member_id": action.member_id,
                "group_instance_id": self.config.group_instance_id}
        fut = self.net.send(self._coordinator_dest(), ApiKey.HEARTBEAT, body,
                            timeout_ms=self.config.session_timeout_ms)

        def done(f: Future[Any]) -> None:
            with self.lock:
                now = self._now()
                if f.failed():
                    self.machine.coordinator_dead(f"heartbeat failed: {f.exception()}", now)
                    self.machine.heartbeat_in_flight = False
                else:
                    self.machine.on_heartbeat_response(int(f.value.error_code), now,
                                                       action.generation)

        fut.add_done_callback(done)

    # ---- offsets ------------------------------------------------------------------------

    def _commit_body(self, offsets: Mapping[TopicPartition, Any],
                     identity: tuple[int, str]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, value in offsets.items():
            offset, meta = (value, "") if isinstance(value, int) else (value[0], value[1])
            topics[tp.topic].append({"partition_index": tp.partition,
                                     "committed_offset": int(offset),
                                     "committed_leader_epoch": -1,
                                     "committed_metadata": meta or ""})
        generation, member = identity
        return {"group_id": self.group_id, "generation_id_or_member_epoch": generation,
                "member_id": member, "group_instance_id": self.config.group_instance_id,
                "retention_time": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def send_commit(self, offsets: Mapping[TopicPartition, Any]) -> Future[None]:
        """Commit asynchronously; the future fails with the first partition error.

        A group member commits with its generation and member id (see
        :meth:`Membership.commit_identity`); without a generation it fails at once with
        :class:`CommitFailedError`, as Kafka's consumer does, instead of sending a commit
        the coordinator would reject.
        """
        result: Future[None] = Future()
        if not offsets:
            result.success(None)
            return result
        with self.lock:
            identity = self.machine.commit_identity() if self.subs.auto_assigned else (-1, "")
        if identity is None:
            result.failure(error_for(27, "the consumer is completing a rebalance: poll() "
                                         "finishes it, then commit again"))
            return result
        if identity[0] < 0 and self.subs.auto_assigned:
            result.failure(CommitFailedError(
                "commit failed: the consumer is not part of an active group (it left, or "
                "the group removed it); poll() joins it again"))
            return result
        if self.machine.coordinator is None:
            result.failure(error_for(15, "coordinator unknown"))
            return result
        fut = self.net.send(self._coordinator_dest(), ApiKey.OFFSET_COMMIT,
                            self._commit_body(offsets, identity))

        def done(f: Future[Any]) -> None:
            now = self._now()
            if f.failed():
                with self.lock:
                    self.machine.coordinator_dead("commit failed", now)
                result.failure(f.exception() or KafkaError("commit failed"))
                return
            for t in f.value.topics:
                for p in t.partitions:
                    code = int(p.error_code)
                    if code:
                        with self.lock:
                            self.machine.on_commit_error(code, now, identity[0])
                        if code in _COMMIT_REJOIN and identity[0] >= 0:
                            result.failure(CommitFailedError(
                                f"commit failed: group rebalanced ({error_for(code)})", code))
                        else:
                            result.failure(error_for(code, f"commit {t.name}"))
                        return
            result.success(None)

        fut.add_done_callback(done)
        return result

    def commit_sync(self, offsets: Mapping[TopicPartition, Any], timeout_s: float,
                    interruptible: bool = False) -> None:
        """Commit and wait; retries retriable errors (coordinator moves) until timeout.

        ``interruptible``: a ``wakeup()`` aborts the retries (user-called commits).
        """
        deadline = self.clock() + timeout_s
        while True:
            if interruptible:
                self._check_wakeup()
            if self.machine.coordinator is None and not self.ensure_coordinator(deadline):
                raise KafkaTimeoutError("commit: coordinator not available")
            fut = self.send_commit(offsets)
            try:
                fut.result(max(0.1, deadline - self.clock()))
                return
            except CommitFailedError:
                raise
            except KafkaError as exc:
                # COORDINATOR_LOAD_IN_PROGRESS waits; NOT_COORDINATOR and lost connections
                # have marked the coordinator unknown, so the next round finds it again.
                if not exc.retriable or self.clock() >= deadline:
                    raise
                log.debug("commit failed, retrying: %s", exc)
                self._sleep(self.config.retry_backoff_ms / 1000)

    def maybe_auto_commit(self, now: float) -> None:
        if not self.auto_commit or now < self.next_auto_commit:
            return
        self.next_auto_commit = now + self.auto_commit_interval
        if self.machine.coordinator is None and self.subs.type.name != "NONE":
            self.ensure_coordinator(self.clock() + 0.5)
        offsets = self.subs.consumed()
        if offsets and self.machine.coordinator is not None:
            self.send_commit(offsets).add_done_callback(self._log_auto_commit)

    def _log_auto_commit(self, f: Future[None]) -> None:
        if f.failed():
            log.info("auto-commit failed: %s", f.exception())

    def _commit_before_revoke(self, action: CommitOffsets) -> None:
        offsets = self.subs.consumed()
        if not offsets:
            return
        try:
            self.commit_sync(offsets, 5.0)
        except KafkaError as exc:
            log.info("auto-commit before rebalance failed: %s", exc)

    def fetch_committed(self, partitions: Sequence[TopicPartition], timeout_s: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` for this group (None: nothing committed)."""
        deadline = self.clock() + timeout_s
        topics: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            topics[tp.topic].append(tp.partition)
        body = {"group_id": self.group_id, "require_stable": True,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        while True:
            self._check_wakeup()
            if not self.ensure_coordinator(deadline):
                raise KafkaTimeoutError("OffsetFetch: coordinator not available")
            try:
                resp = self.net.call(self._coordinator_dest(), ApiKey.OFFSET_FETCH, body,
                                     timeout_ms=max(100, (deadline - self.clock()) * 1000))
            except KafkaError:
                with self.lock:
                    self.machine.coordinator_dead("OffsetFetch failed", self._now())
                if self.clock() >= deadline:
                    raise
                continue
            code = int(resp.error_code)
            retry = code in (14, 15, 16)
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for t in resp.topics:
                for p in t.partitions:
                    pcode = int(p.error_code)
                    if pcode in (14, 15, 16, 88):  # includes UNSTABLE_OFFSET_COMMIT
                        retry = True
                    elif pcode:
                        raise error_for(pcode, f"OffsetFetch {t.name}")
                    offset = int(p.committed_offset)
                    out[TopicPartition(t.name, int(p.partition_index))] = (
                        OffsetAndMetadata(offset, p.metadata or "") if offset >= 0 else None)
            if not retry:
                if code:
                    raise error_for(code, "OffsetFetch")
                return out
            if code in (15, 16):
                with self.lock:
                    self.machine.coordinator_dead(f"OffsetFetch error {code}", self._now())
            if self.clock() >= deadline:
                raise KafkaTimeoutError("OffsetFetch did not complete")
            self._sleep(self.config.retry_backoff_ms / 1000)

    # ---- metadata-driven rejoin -----------------------------------------------------------

    def _match_pattern(self) -> bool:
        cluster = self.metadata.refresh(None)
        return self.subs.match_pattern(cluster.partitions, cluster.internal)

    def _snapshot(self) -> dict[str, int]:
        cluster = self.metadata.cluster
        return {t: cluster.partition_count(t) or 0 for t in self.subs.topics}

    def check_metadata(self) -> None:
        """After a metadata refresh: rejoin when topics or partition counts changed."""
        if not self.subs.auto_assigned or self.machine.needs_rejoin():
            return
        changed = False
        if self.subs.type.name == "PATTERN":
            cluster = self.metadata.cluster
            changed = self.subs.match_pattern(cluster.partitions, cluster.internal)
        if changed or self._snapshot() != self.joined_snapshot:
            with self.lock:
                self.machine.request_rejoin("subscribed topics or partitions changed")

    # ---- shutdown -----------------------------------------------------------------------

    def unsubscribe(self) -> None:
        """Leave the group (revoking partitions first) and stop heartbeating."""
        owned = frozenset(self.subs.assignment)
        if owned and self.subs.auto_assigned and self.machine.generation >= 0:
            self._invoke_listener("on_partitions_revoked", owned)
        with self.lock:
            actions = self.machine.leave("the consumer unsubscribed")
        for action in actions:
            if isinstance(action, SendLeaveGroup):
                self._send_leave(action)

    def close(self, commit: bool, timeout_s: float = 10.0) -> None:
        try:
            if commit and self.auto_commit:
                offsets = self.subs.consumed()
                if offsets and self.group_id:
                    try:
                        self.commit_sync(offsets, timeout_s)
                    except KafkaError as exc:
                        log.info("final auto-commit failed: %s", exc)
            if self.subs.auto_assigned:
                self.unsubscribe()
        finally:
            self._closed.set()
            self._hb_wake.set()
            if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
                self._hb_thread.join(2)

    def _check_wakeup(self) -> None:
        if self._woken():
            raise WakeupError("wakeup() called")
