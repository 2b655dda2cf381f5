"""Requests to the coordinator, one frozen dataclass per API (version-independent).

The broker edge fills these from kio requests of any version: absent fields take the
defaults here (e.g. JoinGroup v0 has no rebalance timeout: pass the session timeout).
``None`` means "null on the wire"; the empty member id ``""`` means "unknown member".
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_MEMBER_ID = ""
UNKNOWN_GENERATION_ID = -1


@dataclass(frozen=True)
class JoinGroup:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    #: v4+: a new dynamic member must first obtain a member id (MEMBER_ID_REQUIRED).
    require_known_member_id: bool = True
    #: v9+: a static leader rejoining a Stable group may skip the assignment.
    supports_skip_assignment: bool = True


@dataclass(frozen=True)
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroup:
    """v0-2 carry one member (put it in ``members``); v3+ a batch."""

    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True)
class CommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True)
class CommitTopic:
    name: str
    partitions: tuple[CommitPartition, ...]


@dataclass(frozen=True)
class OffsetCommit:
    group_id: str
    topics: tuple[CommitTopic, ...]
    generation_id: int = UNKNOWN_GENERATION_ID
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    #: v2-v4 only; -1 = broker default retention.
    retention_time_ms: int = -1


@dataclass(frozen=True)
class FetchTopic:
    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class FetchGroup:
    """``topics is None`` fetches every committed offset of the group."""

    group_id: str
    topics: tuple[FetchTopic, ...] | None = None


@dataclass(frozen=True)
class OffsetFetch:
    """v0-7 carry one group; v8+ a batch."""

    groups: tuple[FetchGroup, ...]
    require_stable: bool = False


@dataclass(frozen=True)
class OffsetDelete:
    group_id: str
    topics: tuple[FetchTopic, ...]


@dataclass(frozen=True)
class DescribeGroups:
    groups: tuple[str, ...]


@dataclass(frozen=True)
class ListGroups:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeleteGroups:
    groups: tuple[str, ...]


Event = (
    JoinGroup
    | SyncGroup
    | Heartbeat
    | LeaveGroup
    | OffsetCommit
    | OffsetFetch
    | OffsetDelete
    | DescribeGroups
    | ListGroups
    | DeleteGroups
)
