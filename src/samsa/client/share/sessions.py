"""Share sessions and acknowledgements per partition leader, as a pure state machine.

A share consumer holds one share session on each broker that leads a partition it is
assigned (KIP-932): the first ShareFetch opens it at epoch 0, each later ShareFetch or
ShareAcknowledge carries the next epoch (one request in flight per broker, so the epochs
stay in order), a ShareAcknowledge at epoch -1 closes it (the broker releases what the
member still holds). The session remembers its partitions: a request names only the
partitions new to it or with acknowledgements, and forgets the ones no longer assigned
there. INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND (any top-level error, or no
answer) start the session again at epoch 0.

Acknowledgements wait per partition until they travel: piggybacked on the broker's next
ShareFetch (after ``poll``), or in a ShareAcknowledge as soon as the broker has no request
in flight when a commit asked for them (``commit_sync``, ``commit_async``). An
acknowledgement never goes in an opening request (epoch 0). Each answer yields
:class:`AckResult`\\ s (for the acknowledgement-commit callback) and completes the
commits whose partitions are all answered.

:class:`ShareSessions` takes events with ``now`` (milliseconds: a broker that answered an
error, a partition error or nothing gets no request for ``retry_backoff_ms``) and returns
the requests to send: :class:`SendShareFetch` and :class:`SendShareAcknowledge`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import METADATA_ERRORS
from samsa.client.share.acknowledgements import AcknowledgeType, Acks

__all__ = ["AckResult", "PartitionAnswer", "SendShareAcknowledge", "SendShareFetch",
           "ShareSessions"]

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
MAX_EPOCH = 2**31 - 1
NETWORK_ERROR = int(ErrorCode.network_exception)
RAISED = frozenset({int(ErrorCode.group_authorization_failed),
                    int(ErrorCode.topic_authorization_failed)})
"""Top-level errors the next ``poll`` raises (the others restart the session)."""


@dataclass(frozen=True)
class SendShareFetch:
    """A ShareFetch to ``node``: ``partitions`` (with their acknowledgements) join or stay
    in the session, ``forgotten`` leave it."""

    node: int
    epoch: int
    acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]]
    partitions: frozenset[TopicPartition]
    forgotten: frozenset[TopicPartition]
    commits: Mapping[TopicPartition, frozenset[int]]
    """The commit ids each partition's acknowledgements answer."""

    @property
    def renew(self) -> bool:
        return any(AcknowledgeType.RENEW in a.values() for a in self.acks.values())


@dataclass(frozen=True)
class SendShareAcknowledge:
    """A ShareAcknowledge to ``node`` (epoch -1: it closes the session)."""

    node: int
    epoch: int
    acks: Mapping[TopicPartition, Mapping[int, AcknowledgeType]]
    commits: Mapping[TopicPartition, frozenset[int]]

    @property
    def renew(self) -> bool:
        return any(AcknowledgeType.RENEW in a.values() for a in self.acks.values())


ShareRequest = SendShareFetch | SendShareAcknowledge


@dataclass(frozen=True)
class PartitionAnswer:
    """One partition of an answer: its error (ShareFetch: the fetch's; ShareAcknowledge:
    the acknowledgement's) and, for ShareFetch, the acknowledgement error."""

    tp: TopicPartition
    error: int
    ack_error: int = 0


@dataclass(frozen=True)
class AckResult:
    """The broker's answer to the acknowledgements of ``offsets`` of ``tp``."""

    tp: TopicPartition
    offsets: frozenset[int]
    error: int


@dataclass
class _Session:
    epoch: int = OPEN_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    in_flight: ShareRequest | None = None
    retry_at: float = 0.0


@dataclass
class _Commit:
    waiting: dict[TopicPartition, set[int]]
    results: dict[TopicPartition, int] = field(default_factory=dict)


def _next(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class ShareSessions:
    """See the module docstring. ``leader(tp)`` is the node leading ``tp`` (None when
    unknown: :attr:`metadata_stale` is set and its acknowledgements wait)."""

    def __init__(self, retry_backoff_ms: float = 100.0) -> None:
        self.retry_backoff_ms = retry_backoff_ms
        self.sessions: dict[int, _Session] = {}
        self.pending: dict[TopicPartition, dict[int, tuple[AcknowledgeType, int | None]]] = {}
        self.commits: dict[int, _Commit] = {}
        self.results: list[AckResult] = []
        """Answered acknowledgements, in order, for the callback (the caller drains it)."""
        self.metadata_stale = False
        self.error: int | None = None
        """A top-level error for the next ``poll`` to raise (taken by the caller)."""
        self._commit_ids = 0

    # ---- acknowledgements --------------------------------------------------------------

    def acknowledge(self, acks: Acks, commit: bool = False) -> int | None:
        """Queue ``acks``; with ``commit``, a commit id whose :meth:`commit_result` tells
        when every partition is answered (and asks for a ShareAcknowledge at once)."""
        cid: int | None = None
        if commit:
            self._commit_ids += 1
            cid = self._commit_ids
            self.commits[cid] = _Commit({tp: set(a) for tp, a in acks.items() if a})
        for tp, offsets in acks.items():
            slot = self.pending.setdefault(tp, {})
            for offset, kind in offsets.items():
                slot[offset] = (kind, cid)
        return cid

    def commit_result(self, cid: int) -> dict[TopicPartition, int] | None:
        """The error code per partition of commit ``cid`` once all are answered."""
        c = self.commits.get(cid)
        if c is None or any(c.waiting.values()):
            return None
        del self.commits[cid]
        return c.results

    def in_flight(self) -> bool:
        return any(s.in_flight is not None for s in self.sessions.values())

    def has_pending(self) -> bool:
        return any(self.pending.values())

    # ---- requests ----------------------------------------------------------------------

    def step(self, now: float, leader: Callable[[TopicPartition], int | None],
             assigned: Set[TopicPartition], buffered: Set[int]) -> list[ShareRequest]:
        """The requests to send now: to each broker without one in flight, a
        ShareAcknowledge when a commit waits there, else a ShareFetch when it leads an
        assigned partition and none of its records are still buffered (``buffered``:
        nodes), else (partitions no longer assigned) a ShareAcknowledge of their
        acknowledgements."""
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in assigned:
            node = leader(tp)
            if node is None:
                self.metadata_stale = True
            else:
                by_node.setdefault(node, set()).add(tp)
        acks_by_node: dict[int, set[TopicPartition]] = {}
        for tp, slot in self.pending.items():
            if not slot:
                continue
            node = leader(tp)
            if node is None:
                self.metadata_stale = True
            else:
                acks_by_node.setdefault(node, set()).add(tp)
        out: list[ShareRequest] = []
        for node in sorted(set(by_node) | set(acks_by_node) | set(self.sessions)):
            s = self.sessions.setdefault(node, _Session())
            if s.in_flight is not None or now < s.retry_at:
                continue
            mine = by_node.get(node, set())
            ack_tps = acks_by_node.get(node, set())
            committing = any(cid is not None for tp in ack_tps
                             for _, cid in self.pending[tp].values())
            request: ShareRequest | None = None
            if s.epoch > OPEN_EPOCH and ack_tps and (committing or not mine):
                request = SendShareAcknowledge(node, s.epoch, *self._take(ack_tps))
            elif mine and node not in buffered:
                carried = ack_tps if s.epoch > OPEN_EPOCH else set()
                acks, commits = self._take(carried)
                forgotten = frozenset(tp for tp in s.partitions
                                      if tp not in mine and tp not in carried)
                request = SendShareFetch(
                    node, s.epoch, acks, frozenset((mine - s.partitions) | carried),
                    forgotten, commits)
            elif s.epoch == OPEN_EPOCH and committing and not mine:
                self._fail(ack_tps, int(ErrorCode.share_session_not_found))
            if request is not None:
                s.in_flight = request
                s.epoch = _next(s.epoch)
                out.append(request)
        return out

    def close(self, leader: Callable[[TopicPartition], int | None]) -> list[ShareRequest]:
        """``close``: a ShareAcknowledge at epoch -1 to each broker with an open session
        and none in flight, carrying the acknowledgements waiting for it; the others'
        acknowledgements fail."""
        out: list[ShareRequest] = []
        for node, s in sorted(self.sessions.items()):
            if s.in_flight is not None or s.epoch == OPEN_EPOCH:
                continue
            tps = {tp for tp, slot in self.pending.items() if slot and leader(tp) == node}
            request = SendShareAcknowledge(node, CLOSE_EPOCH, *self._take(tps))
            s.in_flight = request
            out.append(request)
        self._fail({tp for tp, slot in self.pending.items() if slot},
                   int(ErrorCode.share_session_not_found))
        return out

    def _take(self, tps: Iterable[TopicPartition]
              ) -> tuple[dict[TopicPartition, dict[int, AcknowledgeType]],
                         dict[TopicPartition, frozenset[int]]]:
        acks: dict[TopicPartition, dict[int, AcknowledgeType]] = {}
        commits: dict[TopicPartition, frozenset[int]] = {}
        for tp in tps:
            slot = self.pending.pop(tp, {})
            if not slot:
                continue
            acks[tp] = {o: kind for o, (kind, _) in slot.items()}
            commits[tp] = frozenset(cid for _, cid in slot.values() if cid is not None)
        return acks, commits

    # ---- answers -----------------------------------------------------------------------

    def on_answer(self, request: ShareRequest, now: float, error: int,
                  partitions: Iterable[PartitionAnswer]) -> None:
        """The broker answered ``request`` (``error``: the top-level error code)."""
        partitions = list(partitions)
        s = self.sessions.setdefault(request.node, _Session())
        if error or any(p.error for p in partitions):
            s.retry_at = now + self.retry_backoff_ms
        if s.in_flight is request:
            s.in_flight = None
        if request.epoch == CLOSE_EPOCH:
            self.sessions.pop(request.node, None)
        if error:
            self._reset(request.node)
            if error in RAISED:
                self.error = error
            self._answer(request, {}, error)
            return
        answered: dict[TopicPartition, int] = {}
        fetch = isinstance(request, SendShareFetch)
        for p in partitions:
            if p.error in METADATA_ERRORS:
                self.metadata_stale = True
            if fetch:
                answered[p.tp] = p.ack_error or (p.error if p.error in METADATA_ERRORS else 0)
            else:
                answered[p.tp] = p.error
        if fetch and request.epoch != CLOSE_EPOCH:
            assert isinstance(request, SendShareFetch)
            s.partitions |= request.partitions
            s.partitions -= request.forgotten
        self._answer(request, answered, int(ErrorCode.unknown_server_error))

    def on_failed(self, request: ShareRequest, now: float) -> None:
        """No answer (disconnected, timed out): the session starts again."""
        s = self.sessions.get(request.node)
        if s is not None and s.in_flight is request:
            s.in_flight = None
            s.retry_at = now + self.retry_backoff_ms
        if request.epoch == CLOSE_EPOCH:
            self.sessions.pop(request.node, None)
        else:
            self._reset(request.node)
        self.metadata_stale = True
        self._answer(request, {}, NETWORK_ERROR)

    def _reset(self, node: int) -> None:
        s = self.sessions.get(node)
        if s is not None:
            s.epoch = OPEN_EPOCH
            s.partitions.clear()

    def _answer(self, request: ShareRequest, answered: Mapping[TopicPartition, int],
                missing: int) -> None:
        for tp, acks in request.acks.items():
            self._result(tp, frozenset(acks), answered.get(tp, missing),
                         request.commits.get(tp, frozenset()))

    def _fail(self, tps: Iterable[TopicPartition], error: int) -> None:
        for tp in list(tps):
            slot = self.pending.pop(tp, {})
            if slot:
                self._result(tp, frozenset(slot), error,
                             frozenset(cid for _, cid in slot.values() if cid is not None))

    def _result(self, tp: TopicPartition, offsets: frozenset[int], error: int,
                commits: frozenset[int]) -> None:
        self.results.append(AckResult(tp, offsets, error))
        for cid in commits:
            c = self.commits.get(cid)
            if c is None or tp not in c.waiting:
                continue
            c.waiting[tp] -= offsets
            if error or tp not in c.results:
                c.results[tp] = error or c.results.get(tp, 0)
