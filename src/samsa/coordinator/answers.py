"""Whole-request error answers (group status checks, failed appends)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.events import (
    ConsumerGroupDescribe,
    ConsumerGroupHeartbeat,
    DeleteGroups,
    DescribeGroups,
    Event,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    ShareGroupOffsetsChange,
    SyncGroup,
    TxnOffsetCommit,
)
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DeletedGroup,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    FetchedGroup,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionError,
    Response,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
    ShareGroupOffsetsChangeResponse,
    SyncGroupResponse,
    TopicErrors,
)

E = ErrorCode

#: APIs that accept the empty group id (Kafka's ``isValidGroupId``).
_EMPTY_ID_OK = (OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups,
                # ConsumerGroupHeartbeat: INVALID_REQUEST, from its own validation
                ConsumerGroupHeartbeat, ShareGroupHeartbeat)


def group_ids(event: Event) -> tuple[str, ...]:
    """The group ids an event is about (empty for ListGroups)."""
    if isinstance(event, OffsetFetch):
        return tuple(g.group_id for g in event.groups)
    if isinstance(event, DescribeGroups | DeleteGroups | ConsumerGroupDescribe
                          | ShareGroupDescribe):
        return event.groups
    if isinstance(event, ListGroups):
        return ()
    return (event.group_id,)


def invalid_group_id(event: Event, group_id: str) -> bool:
    return group_id == "" and not isinstance(event, _EMPTY_ID_OK)


def error_response(event: Event, error: int) -> Response:
    """``event`` answered with ``error`` everywhere (every group, topic, partition)."""
    match event:
        case JoinGroup():
            return JoinGroupResponse(error, event.member_id)
        case SyncGroup():
            return SyncGroupResponse(error)
        case Heartbeat():
            return HeartbeatResponse(error)
        case LeaveGroup():
            return LeaveGroupResponse(error)
        case OffsetCommit() | TxnOffsetCommit():
            return OffsetCommitResponse(
                tuple(
                    TopicErrors(
                        t.name, tuple(PartitionError(p.partition, error) for p in t.partitions)
                    )
                    for t in event.topics
                )
            )
        case OffsetFetch():
            return OffsetFetchResponse(
                tuple(FetchedGroup(g.group_id, (), error) for g in event.groups)
            )
        case OffsetDelete():
            return OffsetDeleteResponse(error)
        case DescribeGroups():
            return DescribeGroupsResponse(tuple(DescribedGroup(g, error, "") for g in event.groups))
        case ListGroups():
            return ListGroupsResponse(error, ())
        case DeleteGroups():
            return DeleteGroupsResponse(tuple(DeletedGroup(g, error) for g in event.groups))
        case ConsumerGroupHeartbeat():
            return ConsumerGroupHeartbeatResponse(error)
        case ConsumerGroupDescribe():
            return ConsumerGroupDescribeResponse(
                tuple(ConsumerDescribedGroup(g, error) for g in event.groups))
        case ShareGroupHeartbeat():
            return ShareGroupHeartbeatResponse(error)
        case ShareGroupDescribe():
            return ShareGroupDescribeResponse(
                tuple(ConsumerDescribedGroup(g, error) for g in event.groups))
        case ShareGroupOffsetsChange():
            return ShareGroupOffsetsChangeResponse(error)
    raise TypeError(f"not a coordinator event: {event!r}")


def status_error_response(event: Event, error: int) -> Response:
    """Group-status errors, with Kafka's loading quirks: while a shard loads, Heartbeat is
    answered NONE and SyncGroup REBALANCE_IN_PROGRESS (old clients do not expect
    COORDINATOR_LOAD_IN_PROGRESS there)."""
    if error == E.coordinator_load_in_progress:
        if isinstance(event, Heartbeat):
            return HeartbeatResponse(E.none)
        if isinstance(event, SyncGroup):
            return SyncGroupResponse(E.rebalance_in_progress)
    return error_response(event, error)
