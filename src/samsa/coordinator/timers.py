"""Keyed timers injected into the coordinator.

The shard asks its :class:`Timer` to ``schedule(key, deadline_ms)`` or ``cancel(key)``; when a
deadline passes, the owner of the loop calls ``Coordinator.fire(key, now_ms)`` (or
``CoordinatorShard.fire``) and handles the returned result like a request's. Scheduling a key
again replaces its deadline. A stale fire is ignored by the shard, so a timer implementation
may be sloppy about cancellation; an early fire (the loop's clock ahead of the shard's) makes
the shard schedule the key again at its deadline, so it is never lost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class TimerKind(enum.Enum):
    INITIAL_REBALANCE_DELAY = "initial-rebalance-delay"
    REBALANCE_TIMEOUT = "rebalance-timeout"
    SESSION = "session"
    PENDING_MEMBER = "pending-member"
    PENDING_SYNC = "pending-sync"
    OFFSETS_EXPIRY = "offsets-expiry"
    #: consumer (KIP-848) groups: a member's session, and its time to revoke partitions
    CONSUMER_SESSION = "consumer-session"
    CONSUMER_REBALANCE = "consumer-rebalance"
    #: classic members of a consumer group: time to rejoin, and to sync after a join
    CONSUMER_JOIN = "consumer-join"
    CONSUMER_SYNC = "consumer-sync"
    #: a consumer group's next target assignment, once its assignment interval has passed
    CONSUMER_ASSIGNMENT = "consumer-assignment"
    #: the transaction coordinator (:mod:`samsa.transactions`): an open transaction's
    #: timeout (``group_id`` holds the transactional id)
    TRANSACTION_TIMEOUT = "transaction-timeout"
    #: an idle transactional id's expiry (``transactional.id.expiration.ms``)
    TRANSACTIONAL_ID_EXPIRATION = "transactional-id-expiration"
    #: share (KIP-932) groups: a member's session
    SHARE_SESSION = "share-session"

    #: Members are singletons: hashed by identity, in C (Enum's own hash is Python code,
    #: and a timer key is hashed a few times per heartbeat).
    __hash__ = object.__hash__


@dataclass(frozen=True)
class TimerKey:
    """Identifies one timer: its shard (partition), kind, group and member."""

    partition: int
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""

    def __lt__(self, other: object) -> bool:  # enums do not order; compare by value tuple
        if not isinstance(other, TimerKey):
            return NotImplemented
        return self._tuple() < other._tuple()

    def _tuple(self) -> tuple[int, str, str, str]:
        return (self.partition, self.kind.value, self.group_id, self.member_id)


class Timer(Protocol):
    """What the coordinator needs from the event loop's timer service."""

    def schedule(self, key: TimerKey, deadline_ms: int) -> None: ...

    def cancel(self, key: TimerKey) -> None: ...
