"""The coordinator of one node: the shards (``__consumer_offsets`` partitions) it owns.

Nothing here assumes one node owns every shard: a group whose shard is not loaded here is
answered NOT_COORDINATOR, one whose shard is loading COORDINATOR_LOAD_IN_PROGRESS.
Multi-group requests (OffsetFetch v8+, DescribeGroups, DeleteGroups, ListGroups) are split
per group, handled by each group's shard and merged in request order; their records carry
each shard's partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from samsa.coordinator import detail, queries
from samsa.coordinator.answers import error_response, status_error_response
from samsa.coordinator.config import CoordinatorConfig
from samsa.coordinator.consumer.topics import EMPTY_TOPICS, TopicsSnapshot
from samsa.coordinator.core import MemberIdFactory, default_member_id
from samsa.coordinator.events import (
    ConsumerGroupDescribe,
    DeleteGroups,
    DescribeGroups,
    Event,
    FetchGroup,
    ListGroups,
    OffsetFetch,
    ShareGroupDescribe,
)
from samsa.coordinator.hashing import partition_for
from samsa.coordinator.history.model import HistoryEvent, LoadInfo
from samsa.coordinator.jobs import Job
from samsa.coordinator.records import RecordKey, RecordValue
from samsa.coordinator.responses import (
    ConsumerDescribedGroup,
    ConsumerGroupDescribeResponse,
    DeletedGroup,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    FetchedGroup,
    ListedGroup,
    ListGroupsResponse,
    OffsetFetchResponse,
    Response,
    ShareGroupDescribeResponse,
)
from samsa.coordinator.result import EMPTY_RESULT, Record, Reply, Result
from samsa.coordinator.shard import CoordinatorShard, ShardStatus
from samsa.coordinator.timers import Timer, TimerKey

E = ErrorCode

_Split = Callable[[Event], list[tuple[str, Event]]]

#: Group ids whose shard :meth:`Coordinator.partition_for` remembers (then it starts over).
_PARTITIONS_KEPT = 1 << 16


class Coordinator:
    """Owns shards; routes requests and timer expiries to them."""

    def __init__(
        self,
        config: CoordinatorConfig,
        timer: Timer,
        member_id_factory: MemberIdFactory = default_member_id,
    ) -> None:
        self.config = config
        self.timer = timer
        self.member_id_factory = member_id_factory
        self.shards: dict[int, CoordinatorShard] = {}
        self.topics: TopicsSnapshot = EMPTY_TOPICS
        self._partitions: dict[str, int] = {}

    def update_metadata(self, topics: TopicsSnapshot, now_ms: int | None = None) -> None:
        """The cluster's topics changed (or are first known): consumer groups see the new
        snapshot on their next heartbeat. Nothing is written now.

        Each snapshot gets a higher version; with ``now_ms`` (the edge's wall clock) it is
        at least ``now_ms``, so versions stay comparable across restarts and nodes (resolved
        regexes record the version they saw). ``new_topics_version`` moves only when a
        topic name appears (Kafka's ``lastMetadataImageWithNewTopics``)."""
        old = self.topics
        version = max(old.version + 1, now_ms or 0)
        appeared = not set(topics.by_name) <= set(old.by_name)
        self.topics = replace(topics, version=version, new_topics_version=(
            version if appeared else old.new_topics_version))
        for shard in self.shards.values():
            shard.topics = self.topics

    # ------------------------------------------------------------------ routing

    def partition_for(self, group_id: str) -> int:
        """The group's shard; remembered (Java's string hash is a Python loop, and every
        heartbeat asks)."""
        found = self._partitions.get(group_id)
        if found is None:
            if len(self._partitions) >= _PARTITIONS_KEPT:
                self._partitions.clear()
            found = partition_for(group_id, self.config.offsets_topic_num_partitions)
            self._partitions[group_id] = found
        return found

    def shard_for(self, group_id: str) -> CoordinatorShard | None:
        return self.shards.get(self.partition_for(group_id))

    def coordinator_error(self, group_id: str) -> int:
        """FindCoordinator's answer for a group on this node: NONE, LOAD_IN_PROGRESS or
        NOT_COORDINATOR."""
        shard = self.shard_for(group_id)
        if shard is None or shard.status is ShardStatus.UNLOADED:
            return E.not_coordinator
        if shard.status is ShardStatus.LOADING:
            return E.coordinator_load_in_progress
        return E.none

    # ------------------------------------------------------------------ shard lifecycle

    def begin_load(self, partition: int) -> CoordinatorShard:
        """Create a LOADING shard; feed it with ``shard.replay(key, value)``."""
        shard = CoordinatorShard(partition, self.config, self.timer, self.member_id_factory)
        shard.topics = self.topics
        self.shards[partition] = shard
        return shard

    def finish_load(self, partition: int, now_ms: int, info: LoadInfo | None = None) -> Result:
        return self.shards[partition].finish_load(now_ms, info)

    def load(
        self, partition: int, records: Iterable[tuple[RecordKey, RecordValue | None]],
        now_ms: int, info: LoadInfo | None = None
    ) -> Result:
        return self.begin_load(partition).load(records, now_ms, info)

    def unload(self, partition: int) -> Result:
        shard = self.shards.pop(partition, None)
        return EMPTY_RESULT if shard is None else shard.unload()

    # ------------------------------------------------------------------ background jobs

    def complete(self, job: Job, outcome: object, now_ms: int) -> Result:
        """A job of some result finished (:mod:`.jobs`); ignored if its shard is gone."""
        shard = self.shards.get(job.partition)
        return EMPTY_RESULT if shard is None else shard.complete(job, outcome, now_ms)

    # ------------------------------------------------------------------ requests

    def handle(self, event: Event, now_ms: int, reply_to: object = None) -> Result:
        if isinstance(event, ListGroups):
            return self._list_groups(event, now_ms, reply_to)
        if isinstance(event, OffsetFetch):
            return self._per_group(event, now_ms, reply_to, _split_fetch)
        if isinstance(event, DescribeGroups):
            return self._per_group(event, now_ms, reply_to, _split_describe)
        if isinstance(event, DeleteGroups):
            return self._per_group(event, now_ms, reply_to, _split_delete)
        if isinstance(event, ConsumerGroupDescribe | ShareGroupDescribe):
            return self._per_group(event, now_ms, reply_to, _split_consumer_describe)
        shard = self.shard_for(event.group_id)
        if shard is None:
            return Result((), (Reply(reply_to, status_error_response(event, E.not_coordinator)),))
        return shard.handle(event, now_ms, reply_to)

    def _per_group(
        self,
        event: (OffsetFetch | DescribeGroups | DeleteGroups | ConsumerGroupDescribe
                | ShareGroupDescribe),
        now_ms: int,
        reply_to: object,
        split: _Split,
    ) -> Result:
        records: list[Record] = []
        jobs: list[Job] = []
        items: list[object] = []
        for gid, sub in split(event):
            shard = self.shard_for(gid)
            if shard is None:
                response = error_response(sub, E.not_coordinator)
            else:
                result = shard.handle(sub, now_ms, None)
                records.extend(result.records)
                jobs.extend(result.jobs)
                response = result.replies[0].response
            items.append(_only_item(response))
        return Result(tuple(records), (Reply(reply_to, _merge(event, items)),), tuple(jobs))

    def _list_groups(self, event: ListGroups, now_ms: int, reply_to: object) -> Result:
        groups: list[ListedGroup] = []
        error = E.none
        for shard in self.shards.values():
            if shard.status is ShardStatus.LOADING:
                error = E.coordinator_load_in_progress
            elif shard.status is ShardStatus.ACTIVE:
                reply = shard.handle(event, now_ms, None).replies[0].response
                assert isinstance(reply, ListGroupsResponse)
                groups.extend(reply.groups)
        return Result((), (Reply(reply_to, ListGroupsResponse(error, tuple(groups))),))

    # ------------------------------------------------------------------ read-only queries

    def group_summaries(self) -> list[queries.GroupSummary]:
        """Every group (classic and consumer) of the loaded shards, by group id."""
        found = [s for shard in self.shards.values() for s in queries.summaries(shard)]
        return sorted(found, key=lambda s: s.group_id)

    def group_summary(self, group_id: str) -> queries.GroupSummary | None:
        """``group_id``'s summary; None if no loaded shard here has it (a Dead group)."""
        shard = self.shard_for(group_id)
        return None if shard is None else queries.group_summary(shard, group_id)

    def group_state(self, group_id: str) -> tuple[queries.AnyGroupState, int] | None:
        """``group_id``'s state and generation (a consumer group's: its group epoch), or
        None (cheaper than a summary: the metrics ask after every group request)."""
        shard = self.shard_for(group_id)
        return None if shard is None else queries.state_of(shard, group_id)

    def describe(self, group_id: str) -> queries.GroupDescription | None:
        shard = self.shard_for(group_id)
        return None if shard is None else queries.describe(shard, group_id)

    def group_detail(self, group_id: str, now_ms: int) -> detail.GroupDetail | None:
        """``group_id`` in full (members, epochs, assignments, liveness clocks at
        ``now_ms``); None if no loaded shard here has it."""
        shard = self.shard_for(group_id)
        return None if shard is None else detail.group_detail(shard, group_id, now_ms)

    def history(self, group_id: str) -> list[HistoryEvent]:
        """``group_id``'s rebalance history, oldest first (empty if not loaded here)."""
        shard = self.shard_for(group_id)
        return [] if shard is None else shard.hard.history.events(group_id)

    def committed_offsets(self, group_id: str) -> tuple[queries.CommittedOffset, ...]:
        shard = self.shard_for(group_id)
        return () if shard is None else queries.committed_offsets(shard, group_id)

    # ------------------------------------------------------------------ timers

    def fire(self, key: TimerKey, now_ms: int) -> Result:
        shard = self.shards.get(key.partition)
        return EMPTY_RESULT if shard is None else shard.fire(key, now_ms)


# ---------------------------------------------------------------------- splitting / merging


def _split_fetch(event: Event) -> list[tuple[str, Event]]:
    assert isinstance(event, OffsetFetch)
    return [(g.group_id, OffsetFetch((g,), event.require_stable)) for g in event.groups]


def _split_describe(event: Event) -> list[tuple[str, Event]]:
    assert isinstance(event, DescribeGroups)
    return [(g, replace(event, groups=(g,))) for g in event.groups]


def _split_delete(event: Event) -> list[tuple[str, Event]]:
    assert isinstance(event, DeleteGroups)
    return [(g, DeleteGroups((g,))) for g in event.groups]


def _split_consumer_describe(event: Event) -> list[tuple[str, Event]]:
    assert isinstance(event, ConsumerGroupDescribe | ShareGroupDescribe)
    return [(g, replace(event, groups=(g,))) for g in event.groups]


def _only_item(response: Response) -> object:
    if isinstance(response, OffsetFetchResponse | DescribeGroupsResponse | DeleteGroupsResponse
                  | ConsumerGroupDescribeResponse | ShareGroupDescribeResponse):
        return response.groups[0]
    raise TypeError(f"unexpected response {response!r}")


def _merge(event: Event, items: list[object]) -> Response:
    if isinstance(event, OffsetFetch):
        return OffsetFetchResponse(tuple(i for i in items if isinstance(i, FetchedGroup)))
    if isinstance(event, DescribeGroups):
        return DescribeGroupsResponse(tuple(i for i in items if isinstance(i, DescribedGroup)))
    if isinstance(event, ConsumerGroupDescribe):
        return ConsumerGroupDescribeResponse(
            tuple(i for i in items if isinstance(i, ConsumerDescribedGroup)))
    if isinstance(event, ShareGroupDescribe):
        return ShareGroupDescribeResponse(
            tuple(i for i in items if isinstance(i, ConsumerDescribedGroup)))
    return DeleteGroupsResponse(tuple(i for i in items if isinstance(i, DeletedGroup)))


__all__ = ["Coordinator", "FetchGroup"]
