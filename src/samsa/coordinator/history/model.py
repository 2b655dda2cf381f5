"""The rebalance history as typed values: events, their causes and phases, and the part of
a shard's hard state that holds them (:class:`GroupHistories`, changed only by replay).

One :class:`HistoryEvent` per generation bump (classic) or group epoch bump (consumer),
plus events that bump nothing but explain the group (a static member replaced, offsets
reset by an admin, the coordinator loaded after a restart or a fail-over). An event is
written when it opens and again as each phase ends, under the same key; its key names the
group and a slot, ``seq % group.history.max.events``, so the log's compaction keeps the
last events of each group and nothing more.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Cause(enum.Enum):
    """Why an event happened. The value is what the record stores (a readable name: a
    cause this version does not know decodes as :attr:`UNKNOWN`)."""

    UNKNOWN = "unknown"
    MEMBER_JOINED = "member-joined"
    #: a known member sent JoinGroup again (the KIP-800 reason says why)
    MEMBER_REJOINED = "member-rejoined"
    MEMBER_LEFT = "member-left"
    SESSION_EXPIRED = "session-expired"
    #: members did not rejoin (classic) or revoke (consumer) within the rebalance timeout
    REBALANCE_TIMEOUT = "rebalance-timeout"
    #: members never sent SyncGroup within the rebalance timeout
    SYNC_TIMEOUT = "sync-timeout"
    MAX_POLL_EXCEEDED = "max-poll-interval-exceeded"
    SUBSCRIPTION_CHANGED = "subscription-changed"
    #: partitions or topics added or deleted (the subscribed topics' metadata changed)
    TOPICS_CHANGED = "topics-changed"
    #: a subscribed regular expression now resolves to other topics
    REGEX_CHANGED = "regex-changed"
    STATIC_MEMBER_REPLACED = "static-member-replaced"
    ADMIN_REMOVAL = "admin-removal"
    OFFSETS_RESET = "offsets-reset"
    PROTOCOL_UPGRADE = "protocol-upgrade"
    PROTOCOL_DOWNGRADE = "protocol-downgrade"
    COORDINATOR_LOADED = "coordinator-loaded"
    #: a group loaded with more members than group.max.size allows
    GROUP_TOO_LARGE = "group-too-large"

    @classmethod
    def of(cls, text: str) -> Cause:
        try:
            return cls(text)
        except ValueError:
            return cls.UNKNOWN


class Outcome(enum.Enum):
    IN_PROGRESS = "in-progress"
    #: every member synced (classic) or reconciled to the target (consumer)
    STABLE = "stable"
    EMPTY = "empty"
    #: another rebalance started before this one finished
    SUPERSEDED = "superseded"
    #: the coordinator was loaded again while it ran (a classic group loads Stable)
    INTERRUPTED = "interrupted"
    #: the group was deleted, or converted to the other protocol, meanwhile
    ENDED = "ended"
    #: an event that bumps no epoch
    NOTED = "noted"

    @classmethod
    def of(cls, text: str) -> Outcome:
        try:
            return cls(text)
        except ValueError:
            return cls.ENDED


#: the phases a classic rebalance goes through, and a consumer group's
PREPARING, COMPLETING, STABLE = "PreparingRebalance", "CompletingRebalance", "Stable"
ASSIGNING, TARGET_COMPUTED, RECONCILED = "Assigning", "TargetComputed", "Reconciled"
EMPTY, SUPERSEDED, INTERRUPTED, ENDED, LOADED = (
    "Empty", "Superseded", "Interrupted", "Ended", "Loaded")


@dataclass(frozen=True, slots=True)
class Phase:
    """A phase reached at ``at_ms``; ``held_by`` the members it waited for last (the last
    to join, the leader's sync, the last to reconcile), the latest first."""

    name: str
    at_ms: int
    held_by: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class HistoryKey:
    """A history record's key: the group and its slot (``seq % max events``)."""

    group: str
    slot: int


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One event of a group's history (the value of a history record)."""

    seq: int
    #: "classic" or "consumer": the group's type when it happened
    group_type: str
    cause: Cause
    at_ms: int
    #: the member the cause names (who joined, left, expired...), if one
    member_id: str | None = None
    #: the client's reason (KIP-800 JoinGroup/LeaveGroup reason) or the coordinator's words
    reason: str | None = None
    #: members the cause names beyond ``member_id`` (those a timeout removed)
    members: tuple[str, ...] = ()
    #: generation (classic) or group epoch (consumer) before and after; after = before for
    #: an event that bumps nothing, -1 while a classic rebalance has not bumped it yet
    epoch_before: int = -1
    epoch_after: int = -1
    phases: tuple[Phase, ...] = ()
    outcome: Outcome = Outcome.IN_PROGRESS
    #: members when the event was last written
    member_count: int = 0
    #: extra facts as text pairs (load time, lease epoch, partitions reset, ...)
    detail: tuple[tuple[str, str], ...] = ()

    @property
    def bumps(self) -> bool:
        """Whether the event is a generation or group epoch bump."""
        return self.outcome is not Outcome.NOTED

    @property
    def ended_ms(self) -> int | None:
        """When its last phase ended, unless it is still in progress."""
        if self.outcome is Outcome.IN_PROGRESS or not self.phases:
            return None
        return self.phases[-1].at_ms


@dataclass(frozen=True)
class LoadInfo:
    """What the edge knows about a shard load (given to ``finish_load``)."""

    started_ms: int
    node_id: int | None = None
    #: the node that held the shard before (a cluster fail-over or hand-off)
    previous_node: int | None = None
    #: the shard's lease epoch in a cluster
    lease_epoch: int | None = None


@dataclass
class GroupHistories:
    """Every group's recent events in one shard: group -> slot -> event. Part of the
    shard's hard state: it changes only by :meth:`replay`."""

    groups: dict[str, dict[int, HistoryEvent]] = field(default_factory=dict)

    def replay(self, key: HistoryKey, value: HistoryEvent | None) -> None:
        if value is None:
            slots = self.groups.get(key.group)
            if slots is not None:
                slots.pop(key.slot, None)
                if not slots:
                    del self.groups[key.group]
        else:
            self.groups.setdefault(key.group, {})[key.slot] = value

    def events(self, group_id: str) -> list[HistoryEvent]:
        """The group's events, oldest first."""
        return sorted(self.groups.get(group_id, {}).values(), key=lambda e: e.seq)

    def latest(self, group_id: str) -> HistoryEvent | None:
        slots = self.groups.get(group_id)
        return None if not slots else max(slots.values(), key=lambda e: e.seq)

    def slot_of(self, group_id: str, seq: int) -> int | None:
        for slot, event in self.groups.get(group_id, {}).items():
            if event.seq == seq:
                return slot
        return None
