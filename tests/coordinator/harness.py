"""Test context for the coordinator: a Coordinator on a fake clock that records every
record and reply, runs the background jobs its results ask for (at once, or when the test
says: ``hold_jobs``), and checks replay/consistency invariants (like Kafka's
GroupMetadataManagerTestContext)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    Coordinator,
    CoordinatorConfig,
    CoordinatorShard,
    GroupState,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    OffsetCommit,
    Record,
    Result,
    SyncGroup,
    TimerKey,
    TimerKind,
    txn_offsets,
)
from samsa.coordinator.events import Event
from samsa.coordinator.jobs import Job
from samsa.coordinator.queries import GroupDescription
from samsa.coordinator.records import RecordKey, RecordValue, deserialize, serialize
from samsa.coordinator.responses import JoinGroupResponse, Response, SyncGroupResponse
from samsa.coordinator.txn_offsets import Replayer
from tests.coordinator.fake_timer import FakeTimer
from tests.coordinator.subscriptions import encode_subscription

E_NONE = 0
MEMBER_ID_REQUIRED = 79

SUB = encode_subscription(["t"])
PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", SUB),)


#: Every context created by the running test; ``conftest.py`` replays them all afterwards.
LIVE: list[Ctx] = []


@dataclass
class Ctx:
    config: CoordinatorConfig = field(
        default_factory=lambda: CoordinatorConfig(offsets_topic_num_partitions=1)
    )
    partitions: Iterable[int] | None = None
    #: keep offloaded jobs in ``held`` instead of completing them at once (inline jobs,
    #: ``offload=False``, always complete at once, as the broker's edge runs them)
    hold_jobs: bool = False

    def __post_init__(self) -> None:
        LIVE.append(self)
        self.timer = FakeTimer()
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self.coord = Coordinator(self.config, self.timer, self._member_id)
        self.timer.on_fire = self._on_fire
        self.records: list[Record | TxnMarker] = []
        self.replies: dict[object, list[Response]] = {}
        self.results: list[Result] = []
        self.held: list[Job] = []
        wanted = (
            range(self.config.offsets_topic_num_partitions)
            if self.partitions is None
            else self.partitions
        )
        for p in wanted:
            self.absorb(self.coord.load(p, [], self.now))

    # ------------------------------------------------------------------ plumbing

    def _member_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    @property
    def now(self) -> int:
        return self.timer.now_ms

    def absorb(self, result: Result) -> Result:
        self.results.append(result)
        self.records.extend(result.records)
        for reply in result.replies:
            self.replies.setdefault(reply.token, []).append(reply.response)
            assert len(self.replies[reply.token]) == 1, f"token {reply.token} answered twice"
        # as the broker's edge: inline jobs complete at once, then the offloaded ones
        for job in sorted(result.jobs, key=lambda j: j.offload):
            if job.offload and self.hold_jobs:
                self.held.append(job)
            else:
                self.complete(job)
        return result

    def complete(self, job: Job, outcome: object = None) -> Result:
        """Hand ``job``'s outcome (its work's, unless given) back to the coordinator."""
        if job in self.held:
            self.held.remove(job)
        return self.absorb(self.coord.complete(job, job.run() if outcome is None else outcome,
                                               self.now))

    def run_jobs(self) -> None:
        """Complete every held job, oldest first (and those they start)."""
        while self.held:
            self.complete(self.held[0])

    def _on_fire(self, key: TimerKey, now_ms: int) -> None:
        self.absorb(self.coord.fire(key, now_ms))

    def call(self, event: Event) -> int:
        token = next(self._tokens)
        self.absorb(self.coord.handle(event, self.now, token))
        return token

    def marker(self, producer_id: int, epoch: int, commit: bool, group_id: str = "g") -> None:
        """The transaction coordinator wrote a marker to ``group_id``'s partition."""
        shard = self.shard(group_id)
        self.records.append(TxnMarker(shard.partition, producer_id, epoch, commit))
        txn_offsets.complete(shard, producer_id, epoch, commit)

    def reply(self, token: object) -> Response | None:
        got = self.replies.get(token)
        return None if not got else got[0]

    def join_reply(self, token: object) -> JoinGroupResponse:
        r = self.reply(token)
        assert isinstance(r, JoinGroupResponse), r
        return r

    def sync_reply(self, token: object) -> SyncGroupResponse:
        r = self.reply(token)
        assert isinstance(r, SyncGroupResponse), r
        return r

    def sleep(self, ms: int) -> None:
        self.timer.advance(ms)

    def sleep_until(
        self, done: Callable[[], bool], step_ms: int = 100, limit_ms: int = 10**7
    ) -> None:
        waited = 0
        while not done():
            assert waited < limit_ms, "condition never became true"
            self.sleep(step_ms)
            waited += step_ms

    def shard(self, group_id: str = "g") -> CoordinatorShard:
        shard = self.coord.shard_for(group_id)
        assert shard is not None
        return shard

    def state(self, group_id: str = "g") -> GroupState:
        summary = self.coord.group_summary(group_id)
        return GroupState.DEAD if summary is None else summary.state

    def describe(self, group_id: str = "g") -> GroupDescription:
        described = self.coord.describe(group_id)
        assert described is not None, f"no group {group_id}"
        return described

    def committed(self, group_id: str = "g") -> dict[tuple[str, int], int]:
        """The group's committed offsets: {(topic, partition): offset}."""
        return {(o.topic, o.partition): o.offset for o in self.coord.committed_offsets(group_id)}

    def session_deadline(self, member_id: str, group_id: str = "g") -> int | None:
        """When the member's session expires (None: no session timer)."""
        key = TimerKey(self.coord.partition_for(group_id), TimerKind.SESSION, group_id, member_id)
        return self.timer.deadlines.get(key)

    def force_dead(self, group_id: str = "g") -> None:
        """Put a Dead group in place (white-box: Kafka's answer to a request racing with the
        group's removal, which samsa never leaves observable)."""
        group = self.shard(group_id).groups[group_id]
        group.transition(GroupState.DEAD, self.now)

    # ------------------------------------------------------------------ requests

    def join(
        self,
        member_id: str = "",
        group_id: str = "g",
        instance_id: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        client_id: str = "c",
        protocol_type: str = "consumer",
        require_known_member_id: bool = True,
        supports_skip_assignment: bool = True,
    ) -> int:
        return self.call(
            JoinGroup(
                group_id=group_id,
                member_id=member_id,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                group_instance_id=instance_id,
                client_id=client_id,
                client_host="/127.0.0.1",
                require_known_member_id=require_known_member_id,
                supports_skip_assignment=supports_skip_assignment,
            )
        )

    def join_new(self, group_id: str = "g", **kw: object) -> tuple[str, int]:
        """The MEMBER_ID_REQUIRED dance: returns (member id, token of the parked join)."""
        t = self.join("", group_id, **kw)  # type: ignore[arg-type]
        r = self.join_reply(t)
        assert r.error_code == MEMBER_ID_REQUIRED, r
        return r.member_id, self.join(r.member_id, group_id, **kw)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: tuple[tuple[str, bytes], ...] = (),
        group_id: str = "g",
        instance_id: str | None = None,
    ) -> int:
        return self.call(
            SyncGroup(group_id, generation, member_id, assignments, group_instance_id=instance_id)
        )

    def heartbeat(
        self, member_id: str, generation: int, group_id: str = "g", instance_id: str | None = None
    ) -> int:
        return self.call(Heartbeat(group_id, generation, member_id, instance_id))

    def leave(self, *member_ids: str, group_id: str = "g") -> int:
        return self.call(LeaveGroup(group_id, tuple(LeavingMember(m) for m in member_ids)))

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        member_id: str = "",
        generation: int = -1,
        group_id: str = "g",
        metadata: str | None = "",
        instance_id: str | None = None,
    ) -> int:
        by_topic: dict[str, list[CommitPartition]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(CommitPartition(partition, offset, 5, metadata))
        topics = tuple(CommitTopic(t, tuple(ps)) for t, ps in by_topic.items())
        return self.call(OffsetCommit(group_id, topics, generation, member_id, instance_id))

    def stable_group(
        self,
        n: int,
        group_id: str = "g",
        instance_ids: Sequence[str] = (),
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
    ) -> tuple[list[str], int]:
        """n members (static if ``instance_ids`` names them, else dynamic) joined and
        synced; returns (member ids, generation)."""
        ids, tokens = [], []
        for i in range(n):
            if instance_ids:
                tok = self.join("", group_id, instance_ids[i], protocols)
                mid = ""
            else:
                mid, tok = self.join_new(group_id, protocols=protocols)
            ids.append(mid)
            tokens.append(tok)
        self.sleep_until(lambda: all(self.reply(t) is not None for t in tokens))
        responses = [self.join_reply(t) for t in tokens]
        ids = [r.member_id for r in responses]
        gen = responses[0].generation_id
        leader = responses[0].leader
        assignments = tuple((m, m.encode()) for m in ids)
        for mid in ids:
            if mid != leader:
                self.sync(mid, gen, group_id=group_id)
        self.sync(leader, gen, assignments, group_id=group_id)
        assert self.state(group_id) is GroupState.STABLE
        return ids, gen

    # ------------------------------------------------------------------ invariants

    def check_replay(self) -> None:
        check_replay(self.coord, self.records)


class TxnMarker(NamedTuple):
    """A transaction marker the transaction coordinator wrote to a shard's partition (kept
    in :attr:`Ctx.records` where it stands, for the replay check)."""

    partition: int
    producer_id: int
    epoch: int
    commit: bool


def _through_bytes(r: Record) -> tuple[RecordKey, RecordValue | None]:
    """The record as loading reads it back from the log (Kafka's byte formats)."""
    decoded = deserialize(*serialize(r.key, r.value))
    assert decoded is not None, r
    return decoded


def check_replay(coord: Coordinator, records: Iterable[Record | TxnMarker]) -> None:
    """Replaying every record written so far, encoded and decoded as in the log, rebuilds
    each live shard's hard state, and the live groups agree with it."""
    by_partition: dict[int, list[Record | TxnMarker]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    for partition, shard in coord.shards.items():
        fresh = CoordinatorShard(partition, coord.config)
        replayer = Replayer()  # transactional offsets wait for their marker, as on a load
        for r in by_partition.get(partition, []):  # finish_load would write (history)
            if isinstance(r, TxnMarker):
                replayed = replayer.marker(r.producer_id, r.epoch, r.commit)
            else:
                replayed = replayer.record(r.producer, *_through_bytes(r))
            for key, value in replayed:
                fresh.replay(key, value)
        replayer.restore(fresh)
        assert fresh.hard == shard.hard, f"replay differs on partition {partition}"
        check_consistency(shard)


def check_consistency(shard: CoordinatorShard) -> None:
    """Live groups that are Stable or Empty match their persisted metadata."""
    for gid, group in shard.groups.items():
        persisted = shard.hard.groups.get(gid)
        if group.state is GroupState.STABLE:
            assert persisted is not None, f"stable group {gid} never written"
            live = group.to_record({m.member_id: m.assignment for m in group.members.values()})
            assert persisted.generation == live.generation
            assert persisted.protocol == live.protocol
            assert persisted.leader == live.leader
            assert persisted.protocol_type == live.protocol_type
            assert persisted.members == live.members
        elif group.state is GroupState.EMPTY:
            assert not group.members
            if persisted is None:
                assert group.generation == 0
            else:
                assert persisted.generation == group.generation
                assert persisted.members == ()
