"""Offset commits and fetches of a group member: OffsetCommit, OffsetFetch, auto-commit.

A member commits with its generation (or member epoch) and member id
(:meth:`~samsa.client.group.machine.MemberMachine.commit_identity`); a consumer with a manual
assignment commits with neither. Errors that end the member's generation fail a commit with
:class:`~samsa.client.errors.CommitFailedError`; retriable ones (coordinator moved or
loading) are retried by :meth:`OffsetCommitter.commit_sync` until its timeout.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import CommitFailedError, KafkaError, KafkaTimeoutError, error_for
from samsa.client.future import Future
from samsa.client.group.actions import NO_GENERATION, NO_MEMBER_ID
from samsa.client.group.context import MemberContext
from samsa.client.group.discovery import CoordinatorDiscovery
from samsa.client.net import ApiKey

__all__ = ["OffsetAndMetadata", "OffsetCommitter"]

log = logging.getLogger(__name__)

COMMIT_REJOIN = frozenset({ErrorCode.illegal_generation, ErrorCode.unknown_member_id,
                           ErrorCode.rebalance_in_progress})
"""Commit errors of a member whose generation ended: CommitFailedError, then rejoin."""

FETCH_RETRY = frozenset({ErrorCode.coordinator_load_in_progress,
                         ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
"""OffsetFetch errors retried until the timeout (the last two: look the coordinator up)."""

REVOKE_COMMIT_TIMEOUT_S = 5.0
"""How long the auto-commit before a revocation may take."""


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


class OffsetCommitter:
    """Commits and fetches offsets for the member's group."""

    def __init__(self, member: MemberContext[Any], discovery: CoordinatorDiscovery, *,
                 auto_commit: bool, auto_commit_interval_ms: int) -> None:
        self.member = member
        self.discovery = discovery
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval_ms
        self.next_auto_commit = member.now_ms() + auto_commit_interval_ms
        self._pending: tuple[Any, Future[Any]] | None = None
        """The OffsetFetch a poll left in flight, and what it asked (see poll_committed)."""

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
        return {"group_id": self.member.group_id, "generation_id_or_member_epoch": generation,
                "member_id": member, "group_instance_id": self.member.config.group_instance_id,
                "retention_time": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def send_commit(self, offsets: Mapping[TopicPartition, Any]) -> Future[None]:
        """Commit asynchronously; the future fails with the first partition error.

        Without a generation a group member fails at once with :class:`CommitFailedError`,
        as Kafka's consumer does, instead of sending a commit the coordinator would reject;
        between its JoinGroup and SyncGroup answers with REBALANCE_IN_PROGRESS.
        """
        m = self.member
        result: Future[None] = Future()
        if not offsets:
            result.success(None)
            return result
        with m.lock:
            identity = (m.machine.commit_identity() if m.subs.auto_assigned
                        else (NO_GENERATION, NO_MEMBER_ID))
        if identity is None:
            result.failure(error_for(ErrorCode.rebalance_in_progress,
                                     "the consumer is completing a rebalance: poll() "
                                     "finishes it, then commit again"))
            return result
        if identity[0] < 0 and m.subs.auto_assigned:
            result.failure(CommitFailedError(
                "commit failed: the consumer is not part of an active group (it left, or "
                "the group removed it); poll() joins it again"))
            return result
        if m.machine.coordinator is None:
            result.failure(error_for(ErrorCode.coordinator_not_available, "coordinator unknown"))
            return result
        fut = m.net.send(m.coordinator_dest(), ApiKey.OFFSET_COMMIT,
                         self._commit_body(offsets, identity))

        def done(f: Future[Any]) -> None:
            now = m.now_ms()
            if f.failed():
                m.coordinator_dead("commit failed")
                result.failure(f.exception() or KafkaError("commit failed"))
                return
            for t in f.value.topics:
                for p in t.partitions:
                    code = int(p.error_code)
                    if code != ErrorCode.none:
                        with m.lock:
                            m.machine.on_commit_error(code, now, identity[0])
                        if code in COMMIT_REJOIN and identity[0] >= 0:
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
        m = self.member
        deadline = m.clock.now() + timeout_s
        while True:
            if interruptible:
                m.check_wakeup()
            if m.machine.coordinator is None and not self.discovery.ensure(deadline):
                raise KafkaTimeoutError("commit: coordinator not available")
            fut = self.send_commit(offsets)
            try:
                m.result(fut, max(0.1, deadline - m.clock.now()))
                return
            except CommitFailedError:
                raise
            except KafkaError as exc:
                # COORDINATOR_LOAD_IN_PROGRESS waits; NOT_COORDINATOR and lost connections
                # have marked the coordinator unknown, so the next round finds it again.
                if not exc.retriable or m.clock.now() >= deadline:
                    raise
                log.debug("commit failed, retrying: %s", exc)
                m.clock.sleep(m.config.retry_backoff_ms / 1000)

    def restart_auto_commit_timer(self) -> None:
        """A new assignment: the next auto-commit is one interval away."""
        self.next_auto_commit = self.member.now_ms() + self.auto_commit_interval

    def maybe_auto_commit(self, now: float) -> None:
        """Commit consumed positions in the background if the interval has passed."""
        m = self.member
        if not self.auto_commit or now < self.next_auto_commit:
            return
        self.next_auto_commit = now + self.auto_commit_interval
        if m.machine.coordinator is None and m.subs.type.name != "NONE":
            self.discovery.ensure(m.clock.now() + 0.5)
        offsets = m.subs.consumed()
        if offsets and m.machine.coordinator is not None:
            self.send_commit(offsets).add_done_callback(_log_auto_commit)

    def commit_before_revoke(self) -> None:
        """Auto-commit synchronously before partitions are revoked (eager rebalance)."""
        offsets = self.member.subs.consumed()
        if not offsets:
            return
        try:
            self.commit_sync(offsets, REVOKE_COMMIT_TIMEOUT_S)
        except KafkaError as exc:
            log.info("auto-commit before rebalance failed: %s", exc)

    def fetch_committed(self, partitions: Sequence[TopicPartition], timeout_s: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` for this group (None: nothing committed);
        retriable errors are retried until ``timeout_s``, then KafkaTimeoutError."""
        got = self._fetch(partitions, self.member.clock.now() + timeout_s, keep=False)
        assert got is not None
        return got

    def poll_committed(self, partitions: Sequence[TopicPartition], deadline: float
                       ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        """:meth:`fetch_committed` for ``Consumer.poll``: None when the answer has not come
        by ``deadline`` (seconds on the clock). The OffsetFetch stays in flight and the
        next call for the same partitions, in the same generation, takes its answer
        (Kafka's ``pendingCommittedOffsetRequest``): it may be queued on the coordinator
        connection behind a parked JoinGroup."""
        return self._fetch(partitions, deadline, keep=True)

    def _fetch(self, partitions: Sequence[TopicPartition], deadline: float, *, keep: bool
               ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        m = self.member
        topics: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            topics[tp.topic].append(tp.partition)
        body = {"group_id": m.group_id, "require_stable": True,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        key = (frozenset(partitions), m.machine.commit_identity())
        while True:
            m.check_wakeup()
            pending, self._pending = self._pending, None
            if pending is not None and pending[0] == key:
                fut = pending[1]
            else:
                if not self.discovery.ensure(deadline):
                    if keep:
                        return None
                    raise KafkaTimeoutError("OffsetFetch: coordinator not available")
                fut = m.net.send(m.coordinator_dest(), ApiKey.OFFSET_FETCH, body,
                                 timeout_ms=None if keep else
                                 max(100, (deadline - m.clock.now()) * 1000))
            if keep and not m.clock.wait(fut, max(0.0, deadline - m.clock.now())):
                self._pending = (key, fut)
                return None
            try:
                resp = m.result(fut, max(0.1, deadline - m.clock.now()) + 1)
            except KafkaError:
                m.coordinator_dead("OffsetFetch failed")
                if m.clock.now() >= deadline:
                    if keep:
                        return None
                    raise
                continue
            code = int(resp.error_code)
            retry = code in FETCH_RETRY
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for t in resp.topics:
                for p in t.partitions:
                    pcode = int(p.error_code)
                    if pcode in FETCH_RETRY or pcode == ErrorCode.unstable_offset_commit:
                        retry = True
                    elif pcode != ErrorCode.none:
                        raise error_for(pcode, f"OffsetFetch {t.name}")
                    offset = int(p.committed_offset)
                    out[TopicPartition(t.name, int(p.partition_index))] = (
                        OffsetAndMetadata(offset, p.metadata or "") if offset >= 0 else None)
            if not retry:
                if code != ErrorCode.none:
                    raise error_for(code, "OffsetFetch")
                return out
            if code in (ErrorCode.coordinator_not_available, ErrorCode.not_coordinator):
                m.coordinator_dead(f"OffsetFetch error {code}")
            now = m.clock.now()
            if now >= deadline:
                if keep:
                    return None
                raise KafkaTimeoutError("OffsetFetch did not complete")
            backoff = m.config.retry_backoff_ms / 1000
            m.clock.sleep(min(backoff, deadline - now) if keep else backoff)


def _log_auto_commit(f: Future[None]) -> None:
    if f.failed():
        log.info("auto-commit failed: %s", f.exception())
