"""Coordinator answers: frozen dataclasses with Kafka error codes as ints.

The broker edge maps these to kio responses of the request's version (e.g. LeaveGroup v0-2
report the single member's error at the top level; JoinGroup v0-6 send ``""`` for a null
protocol name).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from samsa.coordinator.events import UNKNOWN_GENERATION_ID, TopicPartitions

NONE = int(ErrorCode.none)


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    error_code: int
    member_id: str
    generation_id: int = UNKNOWN_GENERATION_ID
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResponse:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int


@dataclass(frozen=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True)
class LeaveGroupResponse:
    error_code: int
    members: tuple[LeaveGroupMemberResponse, ...] = ()


@dataclass(frozen=True)
class PartitionError:
    partition: int
    error_code: int


@dataclass(frozen=True)
class TopicErrors:
    name: str
    partitions: tuple[PartitionError, ...]


@dataclass(frozen=True)
class OffsetCommitResponse:
    topics: tuple[TopicErrors, ...]


@dataclass(frozen=True)
class FetchedPartition:
    partition: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error_code: int = NONE


@dataclass(frozen=True)
class FetchedTopic:
    name: str
    partitions: tuple[FetchedPartition, ...]


@dataclass(frozen=True)
class FetchedGroup:
    group_id: str
    topics: tuple[FetchedTopic, ...]
    error_code: int = NONE


@dataclass(frozen=True)
class OffsetFetchResponse:
    """v0-7: one group (its ``error_code`` is the top-level error); v8+: all groups."""

    groups: tuple[FetchedGroup, ...]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error_code: int
    topics: tuple[TopicErrors, ...] = ()


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error_code: int
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class ListGroupsResponse:
    error_code: int
    groups: tuple[ListedGroup, ...]


@dataclass(frozen=True)
class DeletedGroup:
    group_id: str
    error_code: int


@dataclass(frozen=True)
class DeleteGroupsResponse:
    groups: tuple[DeletedGroup, ...]


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    """``assignment`` is ``None`` when unchanged since the member's last heartbeat (null on
    the wire); otherwise the member's whole current assignment."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartitions, ...] | None = None


@dataclass(frozen=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerGroupMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    #: v1: 0 = a classic member of a consumer group, 1 = a consumer-protocol member.
    member_type: int = 1


@dataclass(frozen=True)
class ConsumerDescribedGroup:
    group_id: str
    error_code: int
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ConsumerGroupMemberDescription, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[ConsumerDescribedGroup, ...]


@dataclass(frozen=True)
class ShareGroupHeartbeatResponse:
    """``assignment`` is ``None`` when unchanged since the member's last heartbeat."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartitions, ...] | None = None


@dataclass(frozen=True)
class ShareGroupDescribeResponse:
    """Share groups described in the consumer groups' shape (no instance ids, regexes or
    target assignments)."""

    groups: tuple[ConsumerDescribedGroup, ...]


@dataclass(frozen=True)
class ShareGroupOffsetsChangeResponse:
    error_code: int
    error_message: str | None = None


Response = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | OffsetDeleteResponse
    | DescribeGroupsResponse
    | ListGroupsResponse
    | DeleteGroupsResponse
    | ConsumerGroupHeartbeatResponse
    | ConsumerGroupDescribeResponse
    | ShareGroupHeartbeatResponse
    | ShareGroupDescribeResponse
    | ShareGroupOffsetsChangeResponse
)
