"""The sans-I/O group coordinator (Kafka's classic consumer-group protocol).

How the broker edge drives it (one asyncio task per shard keeps calls serialised):

* ``coord = Coordinator(CoordinatorConfig.from_properties(props), timer)`` where ``timer``
  implements :class:`Timer` on the event loop and calls ``coord.fire(key, now_ms)`` when a
  deadline passes.
* Owning ``__consumer_offsets`` partition ``p``: ``coord.begin_load(p)``, then
  ``shard.replay(key, value)`` for each record of the log (typed: ``records.deserialize``
  turns log bytes into them), then ``coord.finish_load(p, now)`` (or
  ``coord.load(p, records, now)``). ``coord.unload(p)`` when giving it up.
* Each request: translate the kio request into an event (:mod:`.events`), call
  ``result = coord.handle(event, now_ms, reply_to=token)``. Append ``result.records`` (each
  :class:`Record` names its partition; ``records.serialize`` gives its bytes) to the log; on
  success deliver every ``result.replies`` entry to the request its ``token`` names (a parked
  JoinGroup/SyncGroup is answered in a later call's result). On failure unload and reload
  the touched shards from their logs and answer every token of the failed result with
  ``error_response(event, COORDINATOR_NOT_AVAILABLE)`` for its own request.
* Timer expiries (``coord.fire``), loads and unloads return results handled the same way.
* FindCoordinator: ``coord.partition_for(key)`` and ``coord.coordinator_error(key)``.
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
from samsa.coordinator.manager import Coordinator
from samsa.coordinator.result import Record, Reply, Result
from samsa.coordinator.shard import CoordinatorShard, ShardStatus
from samsa.coordinator.state import GroupState, IllegalTransition
from samsa.coordinator.timers import Timer, TimerKey, TimerKind

__all__ = [
    "CommitPartition",
    "CommitTopic",
    "Coordinator",
    "CoordinatorConfig",
    "CoordinatorShard",
    "DeleteGroups",
    "DescribeGroups",
    "Event",
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
    "ShardStatus",
    "SyncGroup",
    "Timer",
    "TimerKey",
    "TimerKind",
    "error_response",
    "java_string_hash",
    "partition_for",
]
