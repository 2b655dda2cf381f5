"""Share partitions and share sessions on the partition leader (KIP-932): the asyncio edge
of :mod:`samsa.share`.

* :class:`ShareRuntime` keeps one :class:`~samsa.share.SharePartition` per (share group,
  topic id, partition) this node serves, created at the group's first ShareFetch of the
  partition at the offset ``share.auto.offset.reset`` names (``latest`` by default, as
  Kafka), and runs their acquisition locks on a :class:`~samsa.broker.groups.LoopTimer`
  (early fires re-arm, stale ones are ignored: no expiry is lost);
* share sessions, one per (group, member): ShareFetch epoch 0 opens one (replacing an old
  one), each later ShareFetch/ShareAcknowledge must carry the next epoch (else
  INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND without a session), epoch -1 closes
  it. A closed session, and the connection it was opened on closing, releases the member's
  acquired records (they become available again, delivery counts kept);
* whatever makes records available again (a release, an expired lock) wakes the ShareFetch
  requests waiting for records, as new log data does through the partition's waiters.

State is in memory: a restart starts every share partition again at its reset offset.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from samsa.broker.clock import now_ms
from samsa.broker.groups import LoopTimer
from samsa.share import (
    LockKey,
    OffsetReset,
    SharePartition,
    SharePartitionConfig,
    ShareUpdate,
)

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.partition import Partition

#: (share group, topic id, partition)
SharePartitionKey = tuple[str, uuid.UUID, int]
#: (topic id, partition)
TopicPartition = tuple[uuid.UUID, int]

INT32_MAX = 2**31 - 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    #: the epoch the next request must carry
    epoch: int
    connection: object
    partitions: dict[TopicPartition, None] = field(default_factory=dict)

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class ShareRuntime:
    """This node's share partitions and share sessions. ``group_configs(group_id)`` gives
    the group configs set for a group (``share.auto.offset.reset``,
    ``share.record.lock.duration.ms``, ``share.delivery.count.limit``: KIP-932/KIP-1240)."""

    def __init__(self, config: BrokerConfig,
                 group_configs: Callable[[str], Mapping[str, str]]) -> None:
        self.config = config
        self.group_configs = group_configs
        self.timer: LoopTimer[LockKey] = LoopTimer(self._fire)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._waiters: set[asyncio.Future[None]] = set()

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        """The group's share partition settings: its group configs, else the broker's."""
        own = self.group_configs(group_id)
        config = self.config
        return SharePartitionConfig(
            record_lock_duration_ms=int(own.get("share.record.lock.duration.ms",
                                                config["group.share.record.lock.duration.ms"])),
            delivery_count_limit=int(own.get("share.delivery.count.limit",
                                             config["group.share.delivery.count.limit"])),
            max_record_locks=int(config["group.share.partition.max.record.locks"]),
        )

    def close(self) -> None:
        self.timer.close()
        self._wake()

    # ------------------------------------------------------------------ partitions

    def partition(self, group_id: str, topic_id: uuid.UUID, part: Partition) -> SharePartition:
        """The group's share partition, created at its reset offset on first use."""
        key = (group_id, topic_id, part.index)
        found = self.partitions.get(key)
        if found is None:
            log = part.log
            reset = OffsetReset.parse(
                self.group_configs(group_id).get("share.auto.offset.reset", "latest"))

            def by_time(ts: int) -> int | None:
                hit = log.offset_for_timestamp(ts)
                return None if hit is None else hit[0]

            start = reset.start_offset(log.log_start_offset, log.log_end_offset, now_ms(),
                                       by_time)
            found = SharePartition(key, start, self.timer, self.partition_config(group_id))
            self.partitions[key] = found
        return found

    def existing(self, group_id: str, topic_id: uuid.UUID,
                 index: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic_id, index))

    def _fire(self, key: LockKey) -> None:
        owner = key.owner
        part = self.partitions.get(owner) if isinstance(owner, tuple) else None
        if part is not None:
            self.changed(part.fire(key, now_ms()))

    def changed(self, update: ShareUpdate | None) -> None:
        """A share partition's durable state changed: records may be available again."""
        if update is not None:
            self._wake()

    # ------------------------------------------------------------------ waiting

    def waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        return fut

    def forget(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ sessions

    def session(self, group_id: str, member_id: str, epoch: int, connection: object,
                opening: bool) -> ShareSession:
        """The member's session for a request carrying ``epoch`` (0 opens one when
        ``opening``: ShareFetch only); raises :class:`SessionError` with Kafka's code."""
        key = (group_id, member_id)
        if epoch == 0:
            if not opening:
                raise SessionError(ErrorCode.invalid_share_session_epoch,
                                   "ShareAcknowledge cannot open a share session.")
            opened = ShareSession(group_id, member_id, 1, connection)
            self.sessions[key] = opened
            return opened
        found = self.sessions.get(key)
        if found is None:
            raise SessionError(ErrorCode.share_session_not_found,
                               f"Share session for member {member_id} not found.")
        if epoch != -1:
            if epoch != found.epoch:
                raise SessionError(ErrorCode.invalid_share_session_epoch,
                                   f"Share session epoch {epoch} is not the expected "
                                   f"{found.epoch}.")
            found.advance()
        found.connection = connection
        return found

    def close_session(self, session: ShareSession) -> None:
        """The session ends: its member's acquired records are released."""
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
        self.release_member(session.group_id, session.member_id)

    def release_member(self, group_id: str, member_id: str) -> None:
        for (gid, _, _), part in list(self.partitions.items()):
            if gid == group_id:
                self.changed(part.release_member(member_id))

    def connection_closed(self, connection: object) -> None:
        """A client connection closed: the sessions last used on it close."""
        for session in [s for s in self.sessions.values() if s.connection is connection]:
            self.close_session(session)

    def forget_topics(self, topic_ids: Iterable[uuid.UUID]) -> None:
        """Deleted topics: their share partitions (and locks) go."""
        gone = set(topic_ids)
        for key in [k for k in self.partitions if k[1] in gone]:
            self.partitions.pop(key).release_all()
