"""The sans-I/O group coordinator (Kafka's classic consumer-group protocol).

Public API for the broker edge: :class:`Coordinator` (shards, routing, load/unload, timers,
snapshots), the request events in :mod:`.events`, responses in :mod:`.responses`,
:class:`Result`/:class:`Record`/:class:`Reply`, the :class:`Timer` protocol and
:class:`TimerKey`, record codecs in :mod:`.records` and :func:`partition_for`.
"""

from samsa.coordinator.answers import error_response
from samsa.coordinator.config import CoordinatorConfig
from samsa.coordinator.core import HardState
from samsa.coordinator.events import (
    CommitPartition,
    CommitTopic,
    DeleteGroups,
    DescribeGroups,
    Event,
    FetchGroup,
    FetchTopic,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
)
from samsa.coordinator.hashing import java_string_hash, partition_for
from samsa.coordinator.manager import Coordinator, CoordinatorSnapshot
from samsa.coordinator.result import Record, Reply, Result
from samsa.coordinator.shard import CoordinatorShard, ShardSnapshot, ShardStatus
from samsa.coordinator.state import GroupState, IllegalTransition
from samsa.coordinator.timers import FakeTimer, Timer, TimerKey, TimerKind

__all__ = [
    "CommitPartition",
    "CommitTopic",
    "Coordinator",
    "CoordinatorConfig",
    "CoordinatorShard",
    "CoordinatorSnapshot",
    "DeleteGroups",
    "DescribeGroups",
    "Event",
    "FakeTimer",
    "FetchGroup",
    "FetchTopic",
    "GroupState",
    "HardState",
    "Heartbeat",
    "IllegalTransition",
    "JoinGroup",
    "LeaveGroup",
    "LeavingMember",
    "ListGroups",
    "OffsetCommit",
    "OffsetDelete",
    "OffsetFetch",
    "Record",
    "Reply",
    "Result",
    "ShardSnapshot",
    "ShardStatus",
    "SyncGroup",
    "Timer",
    "TimerKey",
    "TimerKind",
    "error_response",
    "java_string_hash",
    "partition_for",
]
