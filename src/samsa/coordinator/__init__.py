"""The sans-I/O group coordinator: Kafka's classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) and the KIP-848 ``consumer`` protocol (ConsumerGroupHeartbeat), with
online migration between them, committed offsets and their retention, over the records of
``__consumer_offsets``.

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
* Background jobs (:mod:`.jobs`): a result's ``jobs`` (target assignments, regex
  resolutions) are started once its records are appended, and dropped with them otherwise:
  ``job.run()`` in a worker when ``job.offload``, else at once, before anything else of the
  shard; each outcome comes back as ``coord.complete(job, outcome, now_ms)``. Stale, late
  and duplicate completions are the coordinator's to ignore.
* Timer expiries (``coord.fire``), job completions, loads and unloads return results handled
  the same way. :class:`~samsa.coordinator.runtime.ShardRuntime` holds these rules (loading,
  writing, recovering from a lost write) for any driver: the broker's edge and the failover
  simulation run it; the driver starts the jobs.
* FindCoordinator: ``coord.partition_for(key)`` and ``coord.coordinator_error(key)``.
* Read-only views (metrics, tests): ``coord.group_summaries()``, ``coord.describe(group)``,
  ``coord.committed_offsets(group)`` (:mod:`.queries`); ``coord.history(group)``, the
  group's rebalance history (:mod:`.history`, on when ``history_max_events`` > 0).

Where things are. A shard (:mod:`.shard`) holds one family per group type side by side
(:mod:`.family`: :mod:`.classic_family`, :mod:`.consumer.family`, :mod:`.share.family`)
and dispatches each request by the type of the group it names; APIs of every type go
through the group interface (:class:`.family.OffsetsGroup`). :mod:`.core` holds the
primitives (write, reply, timers, jobs, now); records are typed (:mod:`.records`,
:mod:`.consumer.records`, :mod:`.share.records`), made by pure factories
(:mod:`.record_factory`, :mod:`.consumer.record_factory`, :mod:`.share.record_factory`) and
encoded by one writer and reader (:mod:`.codec`).

Group type x API -> module (``c.`` is :mod:`.consumer`):

======================  ============================  ====================================
API                     classic group                 consumer group
======================  ============================  ====================================
JoinGroup               ``join``                      ``c.interop``, ``c.classic_members``
SyncGroup               ``sync``                      (classic members; JoinGroup on an
Heartbeat, LeaveGroup   ``heartbeat``                 empty group makes it classic)
ConsumerGroupHeartbeat  upgrades it: ``c.migrate``    ``c.heartbeat``, ``c.batching``,
                                                      ``c.regex_refresh``, ``c.target``
ConsumerGroupDescribe   GROUP_ID_NOT_FOUND            ``c.describe``
OffsetCommit, -Fetch,   ``offsets`` (one path; the group judges: ``Group``, ``c.commits``)
-Delete, retention
DescribeGroups,         ``admin`` over the views of ``queries`` (a consumer group is
ListGroups,             described as Dead); DeleteGroups through the group interface
DeleteGroups
timers, procedures      ``rebalance``, ``state``      ``c.heartbeat``, ``c.batching``
======================  ============================  ====================================

Share (KIP-932) groups, :mod:`.share`: ShareGroupHeartbeat ``share.heartbeat``,
ShareGroupDescribe ``share.describe``; a classic or consumer API naming a share group is
refused (JoinGroup INCONSISTENT_GROUP_PROTOCOL, the others GROUP_ID_NOT_FOUND, as Kafka's
``ShareGroup``); ListGroups, DescribeGroups and DeleteGroups serve them through the family.

Try it in a REPL from the repository root (``.venv/bin/python``), on the fake clock of
``tests/coordinator``. The test harness does the plumbing (it also answers MEMBER_ID_REQUIRED
and lets the initial rebalance delay pass):

>>> from samsa.coordinator.state import Request, answer
>>> from tests.coordinator.harness import Ctx
>>> ctx = Ctx()
>>> (a, b), generation = ctx.stable_group(2)
>>> ctx.state(), generation, ctx.describe().member_ids
(<GroupState.STABLE: 'Stable'>, 1, ('c-1', 'c-2'))
>>> ctx.reply(ctx.join(a)) is None  # the leader rejoins: parked, the group rebalances
True
>>> ctx.state(), ctx.reply(ctx.heartbeat(b, generation)).error_code
(<GroupState.PREPARING_REBALANCE: 'PreparingRebalance'>, <ErrorCode.rebalance_in_progress: 27>)
>>> answer(Request.HEARTBEAT, ctx.state())  # the cell that decided; all: format_answers()
<Do.RENEW_REJOIN: 'renew, rejoin'>

Or by hand, as the broker's edge does it, with :class:`FakeTimer` as the timer:

>>> from samsa.coordinator import Coordinator, CoordinatorConfig, JoinGroup
>>> from tests.coordinator.fake_timer import FakeTimer
>>> timer = FakeTimer()
>>> coord = Coordinator(CoordinatorConfig(offsets_topic_num_partitions=1), timer)
>>> fired = []
>>> timer.on_fire = lambda key, now_ms: fired.append(coord.fire(key, now_ms))
>>> coord.load(0, [], timer.now_ms)
Result(records=(), replies=(), jobs=())
>>> join = JoinGroup("g", "", "consumer", (("range", b""),), 10_000, 30_000,
...                  require_known_member_id=False)
>>> coord.handle(join, timer.now_ms, reply_to="my join")  # parked: no reply yet
Result(records=(), replies=(), jobs=())
>>> timer.advance(3_000)  # group.initial.rebalance.delay.ms passes: the join is answered
[TimerKey(partition=0, kind=<TimerKind.INITIAL_REBALANCE_DELAY: ...>, group_id='g', member_id='')]
>>> [(r.token, r.response.generation_id) for r in fired[0].replies]
[('my join', 1)]
>>> coord.group_summary("g").state
<GroupState.COMPLETING_REBALANCE: 'CompletingRebalance'>
"""

from samsa.coordinator.answers import error_response
from samsa.coordinator.config import CoordinatorConfig
from samsa.coordinator.consumer.topics import TopicInfo, TopicsSnapshot
from samsa.coordinator.core import HardState
from samsa.coordinator.events import (
    CommitPartition,
    CommitTopic,
    ConsumerGroupDescribe,
    ConsumerGroupHeartbeat,
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
    TopicPartitions,
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
    "ConsumerGroupDescribe",
    "ConsumerGroupHeartbeat",
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
    "TopicInfo",
    "TopicPartitions",
    "TopicsSnapshot",
    "error_response",
    "java_string_hash",
    "partition_for",
]
