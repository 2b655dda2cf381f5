"""Deterministic simulation of a consumer group against the coordinator (VOPR-style).

One seed fixes everything: configuration, members (dynamic or static), their timeouts,
network delays (requests and replies may arrive late and out of order), crashes, stalls,
leaves, restarts, subscription changes and shard fail-overs (unload + reload from the log).
Simulated members behave like Kafka clients: the MEMBER_ID_REQUIRED step, a leader that
assigns partitions round-robin over the union of subscriptions, heartbeats, commits.

Invariants checked after every step (see :meth:`Simulation.check`): one leader per
generation, generations never decrease, a Stable generation assigns each partition at most
once, every reply's error is legal for the request and situation, each request is answered
at most once (and, after draining, exactly once), the timer service mirrors the shards'
deadlines, and replaying all records rebuilds the live hard state.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from samsa import TopicPartition
from samsa.assignors import codec
from samsa.assignors.interface import Assignment, Subscription
from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    ConsumerGroupHeartbeat,
    Coordinator,
    CoordinatorConfig,
    GroupState,
    HardState,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    OffsetCommit,
    Record,
    Reply,
    Result,
    SyncGroup,
    TimerKey,
    TimerKind,
    TopicInfo,
    TopicPartitions,
    TopicsSnapshot,
    error_response,
)
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.consumer.records import ConsumerGroupMemberMetadataKey
from samsa.coordinator.events import Event
from samsa.coordinator.group import Group
from samsa.coordinator.jobs import Job, JobFailed, JobKind
from samsa.coordinator.records import GroupMetadataKey
from samsa.coordinator.responses import (
    ConsumerGroupHeartbeatResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    Response,
    SyncGroupResponse,
)
from tests.coordinator.fake_timer import FakeTimer
from tests.coordinator.subscriptions import encode_subscription

from .harness import check_replay

GROUP = "sim"
GROUP_KEY = GroupMetadataKey(GROUP)
TOPICS = {"t0": 4, "t1": 3, "t2": 2}

NONE, UNKNOWN_MEMBER, ILLEGAL_GEN, REBALANCING = 0, 25, 22, 27
MEMBER_ID_REQUIRED, FENCED, NOT_COORDINATOR, MAX_SIZE = 79, 82, 16, 81
NOT_AVAILABLE = 15

LEGAL: dict[str, set[int]] = {
    "join": {NONE, MEMBER_ID_REQUIRED, UNKNOWN_MEMBER, FENCED, REBALANCING},
    "sync": {NONE, REBALANCING, UNKNOWN_MEMBER, ILLEGAL_GEN, FENCED},
    "heartbeat": {NONE, REBALANCING, UNKNOWN_MEMBER, ILLEGAL_GEN, FENCED},
    "commit": {NONE, REBALANCING, UNKNOWN_MEMBER, ILLEGAL_GEN, FENCED},
    "leave": {NONE, UNKNOWN_MEMBER, FENCED},
}


class InvariantViolation(AssertionError):
    pass


def encode_assignment(partitions: list[str]) -> bytes:
    return ",".join(partitions).encode()


def decode_assignment(data: bytes) -> list[str]:
    return [p for p in data.decode().split(",") if p]


def round_robin(subscriptions: dict[str, list[str]]) -> dict[str, list[str]]:
    """Kafka's RoundRobinAssignor over the union of subscriptions."""
    members = sorted(subscriptions)
    result: dict[str, list[str]] = {m: [] for m in members}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    partitions = [f"{t}:{p}" for t in topics for p in range(TOPICS.get(t, 1))]
    cycle = itertools.cycle(members)
    for tp in partitions:
        topic = tp.split(":")[0]
        for _ in range(len(members)):
            m = next(cycle)
            if topic in subscriptions[m]:
                result[m].append(tp)
                break
    return result


def parse_subscription(metadata: bytes) -> list[str]:
    from samsa.coordinator.consumer_protocol import subscribed_topics

    return sorted(subscribed_topics(metadata) or ())


@dataclass
class Sent:
    member: str
    incarnation: int
    kind: str
    event: Event


@dataclass
class SimMember:
    name: str
    instance_id: str | None
    session_ms: int
    rebalance_ms: int
    heartbeat_ms: int
    topics: list[str]
    status: str = "down"  # down | joining | syncing | stable
    incarnation: int = 0
    member_id: str = ""
    generation: int = -1
    join_token: int | None = None
    sync_token: int | None = None
    hb_token: int | None = None
    next_hb_at: int = 0
    stalled_until: int = 0
    assignment: list[str] = field(default_factory=list)
    inbox: list[tuple[int, Response]] = field(default_factory=list)

    def protocols(self) -> tuple[tuple[str, bytes], ...]:
        meta = encode_subscription(self.topics)
        return (("roundrobin", meta), ("range", meta))


class Simulation:
    #: group.history.max.events of the simulated coordinator (0: no history)
    HISTORY_MAX_EVENTS = 0

    def __init__(self, seed: int, steps: int = 300) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        rng = self.rng
        self.steps = steps
        self.config = CoordinatorConfig(
            initial_rebalance_delay_ms=rng.choice([0, 500, 3000]),
            min_session_timeout_ms=1000,
            offsets_topic_num_partitions=1,
            offsets_retention_minutes=rng.choice([1, 10080]),
            offsets_retention_check_interval_ms=rng.choice([5000, 600_000]),
            max_size=rng.choice([2**31 - 1, 2**31 - 1, 3]),
            history_max_events=self.HISTORY_MAX_EVENTS,
        )
        self.timer = FakeTimer()
        self.timer.on_fire = self._on_fire
        self._ids = itertools.count(1)
        self.coord = Coordinator(self.config, self.timer, lambda p: f"{p}-{next(self._ids)}")
        self.records: list[Record] = []
        self.shadow = HardState()
        self._tokens = itertools.count(1)
        self.sent: dict[int, Sent] = {}
        self.answered: dict[int, Response] = {}
        self.network: list[tuple[int, int, str, object]] = []  # (at, seq, kind, payload)
        self._seq = itertools.count()
        self.leaders: dict[int, str] = {}  # generation -> leader identity
        self.last_generation = 0
        self.log: list[str] = []
        self._in_unload = False
        self._failing = False
        self.members = [self._new_member(i) for i in range(rng.randint(2, 6))]
        self._absorb(self.coord.load(0, [], 0))

    # ------------------------------------------------------------------ setup

    def _new_member(self, i: int) -> SimMember:
        rng = self.rng
        session = rng.choice([6000, 10_000])
        return SimMember(
            name=f"m{i}",
            instance_id=f"inst{i}" if rng.random() < 0.4 else None,
            session_ms=session,
            rebalance_ms=rng.choice([8000, 15_000, 30_000]),
            heartbeat_ms=rng.choice([1000, 2000, 3000]),
            topics=self._random_topics(),
        )

    def _random_topics(self) -> list[str]:
        return sorted(self.rng.sample(sorted(TOPICS), self.rng.randint(1, len(TOPICS))))

    @property
    def now(self) -> int:
        return self.timer.now_ms

    def group(self) -> Group | None:
        shard = self.coord.shard_for(GROUP)
        return None if shard is None else shard.groups.get(GROUP)

    # ------------------------------------------------------------------ coordinator plumbing

    def _on_fire(self, key: TimerKey, now_ms: int) -> None:
        if self.rng.random() < 0.1:
            # a timer service whose clock runs ahead of the coordinator's fires early: the
            # shard must arm the key again (``check`` finds a lost one), and it fires again
            result = self.coord.fire(key, now_ms - self.rng.randint(1, 5))
            if result.records or result.replies:
                raise InvariantViolation(f"early fire of {key} acted before its deadline")
            return
        self._absorb(self.coord.fire(key, now_ms))

    def _absorb(self, result: Result) -> None:
        for r in result.records:
            self.records.append(r)
            self.shadow.replay(r.key, r.value)
            if r.value is None and r.key == GROUP_KEY:
                # the group died (and may be re-created): a new generation sequence starts
                self.last_generation = 0
                self.leaders.clear()
        group = self.group()
        for reply in result.replies:
            token = reply.token
            assert isinstance(token, int)
            if token in self.answered:
                raise InvariantViolation(f"token {token} answered twice")
            self.answered[token] = reply.response
            self._check_reply(self.sent[token], reply.response, group)
            sent = self.sent[token]
            self._post(
                self.rng.choice([0, 0, 50, 300, 2000]), "resp", (token, reply.response, sent)
            )

    def _post(self, delay: int, kind: str, payload: object) -> None:
        heapq.heappush(self.network, (self.now + delay, next(self._seq), kind, payload))

    def send(self, m: SimMember, kind: str, event: Event) -> int:
        token = next(self._tokens)
        self.sent[token] = Sent(m.name, m.incarnation, kind, event)
        r = self.rng.random()
        delay = (
            0
            if r < 0.5
            else self.rng.randint(1, 500)
            if r < 0.95
            else self.rng.randint(2000, 20_000)
        )
        self._post(delay, "req", token)
        return token

    def _deliver_due(self) -> None:
        while self.network and self.network[0][0] <= self.now:
            _, _, kind, payload = heapq.heappop(self.network)
            if kind == "req":
                assert isinstance(payload, int)
                event = self.sent[payload].event
                if self.rng.random() < 0.05:
                    self._failed_append(event, payload)
                else:
                    self._absorb(self.coord.handle(event, self.now, payload))
            else:
                token, response, sent = payload  # type: ignore[misc]
                m = self._member(sent.member)
                if m.incarnation == sent.incarnation:
                    m.inbox.append((token, response))

    def _failed_append(self, event: Event, token: int) -> None:
        """Handle ``event`` as if appending its records failed, as the broker edge recovers:
        reload the shard from the records written so far and answer every request the lost
        result answered with COORDINATOR_NOT_AVAILABLE."""
        lost = self.coord.handle(event, self.now, token)
        if not lost.records:  # nothing to append, nothing can fail
            self._absorb(lost)
            return
        self.log.append(f"{self.now} append failed for {type(event).__name__}")
        self._reload()
        self._failing = True
        self._absorb(Result(replies=tuple(  # as the edge: a token unload answered stays so
            Reply(r.token, error_response(self.sent[r.token].event, NOT_AVAILABLE))  # type: ignore[index]
            for r in lost.replies if r.token not in self.answered)))
        self._failing = False

    def _member(self, name: str) -> SimMember:
        return next(m for m in self.members if m.name == name)

    # ------------------------------------------------------------------ member behaviour

    def join(self, m: SimMember) -> None:
        m.status = "joining"
        m.sync_token = None
        m.join_token = self.send(
            m,
            "join",
            JoinGroup(
                GROUP,
                m.member_id,
                "consumer",
                m.protocols(),
                m.session_ms,
                m.rebalance_ms,
                group_instance_id=m.instance_id,
                client_id=m.name,
                client_host="/sim",
            ),
        )

    def reset_and_rejoin(self, m: SimMember) -> None:
        m.member_id = ""
        m.generation = -1
        m.assignment = []
        self.join(m)

    def on_join(self, m: SimMember, token: int, r: JoinGroupResponse) -> None:
        if token != m.join_token:
            return
        m.join_token = None
        if r.error_code == MEMBER_ID_REQUIRED:
            m.member_id = r.member_id
            self.join(m)
        elif r.error_code == NONE:
            m.member_id, m.generation = r.member_id, r.generation_id
            assignments: tuple[tuple[str, bytes], ...] = ()
            if r.leader == m.member_id and not r.skip_assignment:
                subs = {x.member_id: parse_subscription(x.metadata) for x in r.members}
                plan = round_robin(subs)
                assignments = tuple((k, encode_assignment(v)) for k, v in plan.items())
            m.status = "syncing"
            m.sync_token = self.send(
                m,
                "sync",
                SyncGroup(GROUP, m.generation, m.member_id, assignments, m.instance_id),
            )
        elif r.error_code == FENCED:
            self.crash(m)
        elif r.error_code == UNKNOWN_MEMBER:
            self.reset_and_rejoin(m)
        else:
            self.join(m)

    def on_sync(self, m: SimMember, token: int, r: SyncGroupResponse) -> None:
        if token != m.sync_token:
            return
        m.sync_token = None
        if r.error_code == NONE:
            m.status = "stable"
            m.assignment = decode_assignment(r.assignment)
            m.next_hb_at = self.now + m.heartbeat_ms
        else:
            self.on_error(m, r.error_code)

    def on_error(self, m: SimMember, error: int) -> None:
        if error == FENCED:
            self.crash(m)
        elif error in (UNKNOWN_MEMBER, ILLEGAL_GEN):
            self.reset_and_rejoin(m)
        elif error in (REBALANCING, NOT_COORDINATOR, NOT_AVAILABLE) and self._may_rejoin(m):
            self.join(m)

    @staticmethod
    def _may_rejoin(m: SimMember) -> bool:
        return m.status in ("stable", "syncing") or (m.status == "joining" and m.join_token is None)

    def crash(self, m: SimMember) -> None:
        m.status = "down"
        m.incarnation += 1
        m.join_token = m.sync_token = m.hb_token = None
        m.inbox.clear()

    def restart(self, m: SimMember) -> None:
        m.incarnation += 1
        m.member_id = ""
        m.generation = -1
        m.assignment = []
        m.inbox.clear()
        self.join(m)

    def act(self, m: SimMember) -> None:
        rng = self.rng
        if m.status == "down":
            if rng.random() < 0.03:
                self.restart(m)
            return
        if self.now < m.stalled_until:
            return
        for token, response in m.inbox:
            if isinstance(response, JoinGroupResponse):
                self.on_join(m, token, response)
            elif isinstance(response, SyncGroupResponse):
                self.on_sync(m, token, response)
            elif isinstance(response, HeartbeatResponse):
                if token == m.hb_token:
                    m.hb_token = None
                    if response.error_code != NONE and m.status == "stable":
                        self.on_error(m, response.error_code)
            elif isinstance(response, OffsetCommitResponse):
                codes = {p.error_code for t in response.topics for p in t.partitions}
                if m.status == "stable" and codes - {NONE}:
                    self.on_error(m, max(codes))
            if m.status == "down":
                break
        m.inbox.clear()
        if m.status == "down":
            return
        p = rng.random()
        if p < 0.004:
            self.log.append(f"{self.now} {m.name} crashes")
            self.crash(m)
        elif p < 0.008:
            self.log.append(f"{self.now} {m.name} leaves")
            self.send(m, "leave", LeaveGroup(GROUP, (LeavingMember(m.member_id, m.instance_id),)))
            self.crash(m)
        elif p < 0.014:
            m.stalled_until = self.now + rng.randint(2000, 40_000)
            self.log.append(f"{self.now} {m.name} stalls until {m.stalled_until}")
        elif p < 0.018 and m.status == "stable":
            m.topics = self._random_topics()
            self.join(m)
        elif m.status == "stable":
            if self.now >= m.next_hb_at and m.hb_token is None:
                m.hb_token = self.send(
                    m, "heartbeat", Heartbeat(GROUP, m.generation, m.member_id, m.instance_id)
                )
                m.next_hb_at = self.now + m.heartbeat_ms
            if m.assignment and rng.random() < 0.05:
                by_topic: dict[str, list[CommitPartition]] = {}
                for tp in m.assignment:
                    t, part = tp.split(":")
                    by_topic.setdefault(t, []).append(CommitPartition(int(part), self.now))
                topics = tuple(CommitTopic(t, tuple(ps)) for t, ps in by_topic.items())
                self.send(
                    m,
                    "commit",
                    OffsetCommit(GROUP, topics, m.generation, m.member_id, m.instance_id),
                )

    def failover(self) -> None:
        """The shard moves away and comes back: unload, then reload from the log."""
        self.log.append(f"{self.now} failover")
        self._reload()

    def _reload(self) -> None:
        """Unload the shard and load it again from the records written so far."""
        self._in_unload = True
        self._absorb(self.coord.unload(0))
        self._in_unload = False
        self._absorb(self.coord.load(0, [(r.key, r.value) for r in self.records], self.now))
        persisted = self.coord.shards[0].hard.groups.get(GROUP)
        floor = 0 if persisted is None else persisted.generation
        self.leaders = {g: ld for g, ld in self.leaders.items() if g <= floor}
        self.last_generation = floor

    # ------------------------------------------------------------------ invariants

    def _identity(self, group: Group | None, member_id: str) -> str:
        """A leader's identity: its instance id if static (a static leader may be replaced
        within a generation), else its member id."""
        if group is not None and member_id in group.members:
            instance = group.members[member_id].group_instance_id
            if instance is not None:
                return f"instance:{instance}"
        return member_id

    def _check_reply(self, sent: Sent, response: Response, group: Group | None) -> None:
        legal = set(LEGAL[sent.kind])
        if self.config.max_size < 2**31 - 1:
            legal.add(MAX_SIZE)
        if self._in_unload:
            legal.add(NOT_COORDINATOR)
        if self._failing:
            legal.add(NOT_AVAILABLE)
        if isinstance(response, LeaveGroupResponse):
            codes = {m.error_code for m in response.members}
            if response.error_code not in (NONE, NOT_AVAILABLE if self._failing else NONE) \
                    or not codes <= legal:
                raise InvariantViolation(f"illegal leave answer {response}")
            return
        if isinstance(response, OffsetCommitResponse):
            codes = {p.error_code for t in response.topics for p in t.partitions}
        else:
            assert isinstance(response, JoinGroupResponse | SyncGroupResponse | HeartbeatResponse)
            codes = {response.error_code}
        if not codes <= legal:
            raise InvariantViolation(f"illegal {sent.kind} answer {response} to {sent.event}")
        if isinstance(response, JoinGroupResponse) and response.error_code == NONE:
            self._check_join_ok(response, group)
        if isinstance(response, SyncGroupResponse) and response.error_code == NONE:
            assert isinstance(sent.event, SyncGroup)
            if group is None or group.state is not GroupState.STABLE:
                raise InvariantViolation("sync answered NONE outside Stable")
            if group.generation != sent.event.generation_id:
                raise InvariantViolation("sync answered NONE for another generation")
            member = group.members.get(sent.event.member_id)
            if member is not None and member.assignment != response.assignment:
                raise InvariantViolation("sync answer differs from the stored assignment")
        if isinstance(response, HeartbeatResponse) and response.error_code == NONE:
            assert isinstance(sent.event, Heartbeat)
            if group is None or sent.event.member_id not in group.members:
                raise InvariantViolation("heartbeat NONE for a non-member")
            if group.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                raise InvariantViolation(f"heartbeat NONE in {group.state}")

    def _check_join_ok(self, r: JoinGroupResponse, group: Group | None) -> None:
        if group is None or r.member_id not in group.members:
            raise InvariantViolation(f"join NONE for a non-member {r.member_id}")
        if r.generation_id != group.generation:
            raise InvariantViolation("join answered with a stale generation")
        leader = self._identity(group, r.leader)
        known = self.leaders.setdefault(r.generation_id, leader)
        if known != leader:
            raise InvariantViolation(
                f"two leaders in generation {r.generation_id}: {known} and {leader}"
            )
        if r.members and r.leader != r.member_id:
            raise InvariantViolation("member list sent to a follower")

    def check(self) -> None:
        shard = self.coord.shards[0]
        if self.shadow != shard.hard:
            raise InvariantViolation("replaying the records does not give the live hard state")
        mirrored = {k: d for s in self.coord.shards.values() for k, d in s.deadlines.items()}
        lost = set(mirrored) - set(self.timer.deadlines)
        if lost:
            raise InvariantViolation(f"timers lost (the shard waits, nothing is armed): {lost}")
        if mirrored != self.timer.deadlines:
            raise InvariantViolation("timer service and shard deadlines disagree")
        group = self.group()
        if group is None:
            self.last_generation = 0
            self.leaders.clear()
            return
        if group.generation < self.last_generation:
            raise InvariantViolation(
                f"generation went back {self.last_generation} -> {group.generation}"
            )
        self.last_generation = group.generation
        if group.members and group.leader_id not in group.members:
            raise InvariantViolation("leader is not a member")
        if not set(group.pending_sync) <= set(group.members):
            raise InvariantViolation("pending-sync member is not a member")
        if group.num_awaiting_join() != sum(m.awaiting_join for m in group.members.values()):
            raise InvariantViolation("awaiting-join count differs from the members")
        if group.state is GroupState.EMPTY and group.members:
            raise InvariantViolation("Empty group with members")
        if group.state is GroupState.STABLE:
            seen: set[str] = set()
            for member in group.members.values():
                for tp in decode_assignment(member.assignment):
                    if tp in seen:
                        raise InvariantViolation(f"partition {tp} assigned twice")
                    seen.add(tp)

    # ------------------------------------------------------------------ driver

    def step(self) -> None:
        self.timer.advance(self.rng.choice([0, 100, 300, 700, 1500]))
        self._deliver_due()
        for m in self.rng.sample(self.members, len(self.members)):
            self.act(m)
        if self.rng.random() < 0.003:
            self.failover()
        self._deliver_due()

    def run(self) -> None:
        for i in range(self.steps):
            self.step()
            self.check()
            if i % 50 == 49:
                check_replay(self.coord, self.records)
        self.drain()

    def drain(self) -> None:
        """Everyone stops; after the network empties and timers run out, every request
        must have been answered exactly once."""
        for m in self.members:
            self.crash(m)
        while self.network:
            self.timer.advance(max(0, self.network[0][0] - self.now))
            self._deliver_due()
        self.timer.advance(3_600_000)
        self.check()
        check_replay(self.coord, self.records)
        missing = sorted(set(self.sent) - set(self.answered))
        if missing:
            raise InvariantViolation(f"requests never answered: {missing[:5]}")
        group = self.group()
        if group is not None and (group.members or group.pending_members):
            raise InvariantViolation("members of a silent group never expired")


def run_seed(seed: int, steps: int = 300) -> Simulation:
    sim = Simulation(seed, steps)
    try:
        sim.run()
    except Exception as exc:
        tail = "\n".join(sim.log[-15:])
        raise AssertionError(f"simulation seed {seed} failed: {exc}\n{tail}") from exc
    return sim


# ====================================================================== consumer groups


CONSUMER_GROUP = "csim"
FENCED_EPOCH, UNRELEASED, GROUP_NOT_FOUND = 110, 111, 69
CONSUMER_LEGAL = {NONE, FENCED_EPOCH, UNKNOWN_MEMBER, UNRELEASED, FENCED, GROUP_NOT_FOUND}


@dataclass
class SimConsumer:
    """A consumer-protocol (KIP-848) client: one heartbeat in flight, revokes at once."""

    name: str
    instance_id: str | None
    topics: tuple[str, ...]
    regex: str | None
    status: str = "down"  # down | joining | member
    incarnation: int = 0
    member_id: str = ""
    epoch: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    inflight: int | None = None
    next_hb_at: int = 0
    stalled_until: int = 0
    inbox: list[tuple[int, Response]] = field(default_factory=list)


class ConsumerSimulation:
    """Seeded consumer-protocol members against the coordinator, with delays, crashes,
    stalls, leaves, static restarts, subscription changes, topic changes, failed appends
    and fail-overs. Members also commit the partitions they own with the epoch of their
    last answer, often while a heartbeat is on the way (KIP-1251): such a commit is always
    accepted while the coordinator still knows the member. After every step: no partition
    is held by two members, no member epoch exceeds the group epoch, each member has an
    assignment epoch for exactly the partitions it holds (none above its own epoch),
    replaying the records gives the live state, timers are mirrored, every reply's error is
    legal, and a group short of its target awaits a job still on its way or has its
    assignment timer armed. Background jobs (target assignments, regex resolutions) run
    inline when the group says so, else complete late, out of order, twice, failed, or
    never when a fail-over came first. At the end, after a quiet period with every member
    heartbeating, the group is Stable and each subscribed partition assigned once."""

    #: group.history.max.events of the simulated coordinator (0: no history)
    HISTORY_MAX_EVENTS = 0

    def __init__(self, seed: int, steps: int = 250) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        #: the commits' own draws, so that they leave every other draw of a seed as it was
        self.commit_rng = random.Random(seed + 1_000_003)
        #: the background jobs' draws (their delays, failures, duplicates), likewise
        self.job_rng = random.Random(seed + 2_000_003)
        self.steps = steps
        self.config = CoordinatorConfig(
            offsets_topic_num_partitions=1,
            consumer_session_timeout_ms=rng.choice([6000, 45_000]),
            consumer_heartbeat_interval_ms=rng.choice([1000, 3000]),
            consumer_max_size=rng.choice([2**31 - 1, 2**31 - 1, 4]),
            offsets_retention_minutes=rng.choice([1, 10080]),
            offsets_retention_check_interval_ms=rng.choice([5000, 600_000]),
            history_max_events=self.HISTORY_MAX_EVENTS,
            consumer_assignment_interval_ms=self.job_rng.choice([0, 0, 1000, 3000]),
            consumer_assignor_offload_enable=self.job_rng.random() < 0.7,
        )
        self.timer = FakeTimer()
        self.timer.on_fire = self._on_fire
        self.coord = Coordinator(self.config, self.timer, lambda p: f"{p}-gen")
        self.topic_ids = {name: uuid.UUID(int=i + 1) for i, name in enumerate(
            ["t0", "t1", "t2", "x3"])}
        self.partitions = {"t0": 4, "t1": 3, "t2": 2, "x3": 2}
        self.live_topics = {"t0", "t1", "t2"}
        self.records: list[Record] = []
        self.shadow = HardState()
        self._tokens = itertools.count(1)
        self.sent: dict[int, tuple[str, int, ConsumerGroupHeartbeat]] = {}
        self.answered: dict[int, Response] = {}
        self.network: list[tuple[int, int, str, object]] = []
        self._seq = itertools.count()
        self.log: list[str] = []
        self._failing = self._in_unload = False
        self.calm = False  # the quiet period: no delays, no failures
        #: offloaded jobs whose outcome is still on its way
        self.pending_jobs: set[Job] = set()
        self.members = [self._new_member(i) for i in range(rng.randint(2, 6))]
        self._publish_topics()
        self._absorb(self.coord.load(0, [], 0))

    # ------------------------------------------------------------------ setup and plumbing

    def _new_member(self, i: int) -> SimConsumer:
        rng = self.rng
        regex = rng.choice([None, None, "t.*", "t[01]"])
        topics = () if regex else tuple(sorted(rng.sample(["t0", "t1", "t2"], rng.randint(1, 3))))
        return SimConsumer(f"c{i}", f"ci{i}" if rng.random() < 0.4 else None, topics, regex)

    def _publish_topics(self) -> None:
        self.coord.update_metadata(TopicsSnapshot.of(
            TopicInfo(self.topic_ids[t], t, self.partitions[t]) for t in sorted(self.live_topics)))

    @property
    def now(self) -> int:
        return self.timer.now_ms

    def group(self) -> Any:
        return self.coord.shards[0].hard.consumer.groups.get(CONSUMER_GROUP)

    def _on_fire(self, key: TimerKey, now_ms: int) -> None:
        self._absorb(self.coord.fire(key, now_ms))

    def _absorb(self, result: Result) -> None:
        for r in result.records:
            self.records.append(r)
            self.shadow.replay(r.key, r.value)
        for reply in result.replies:
            token = reply.token
            assert isinstance(token, int)
            if token in self.answered:
                raise InvariantViolation(f"token {token} answered twice")
            self.answered[token] = reply.response
            self._check_reply(reply.response)
            delay = 0 if self.calm else self.rng.choice([0, 0, 50, 300, 2000])
            self._post(delay, "resp", (token, reply.response))
        for job in result.jobs:
            self._start_job(job)

    def _start_job(self, job: Job) -> None:
        """The edge's part: an inline job completes at once; an offloaded one later (so
        completions come out of order), sometimes failed, sometimes twice."""
        if not job.offload:
            self._absorb(self.coord.complete(job, job.run(), self.now))
            return
        rng = self.job_rng
        delay = 0 if self.calm else rng.choice([0, 0, 100, 700, 3000, 15_000])
        outcome = JobFailed("injected") if not self.calm and rng.random() < 0.05 else job.run()
        self._post(delay, "job", (job, outcome))
        if not self.calm and rng.random() < 0.05:
            self._post(delay + rng.randint(0, 5000), "job", (job, outcome))  # a duplicate
        self.pending_jobs.add(job)

    def _complete_job(self, job: Job, outcome: object) -> None:
        self.pending_jobs.discard(job)
        self._absorb(self.coord.complete(job, outcome, self.now))

    def _check_reply(self, response: Response) -> None:
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        legal = set(CONSUMER_LEGAL)
        if self.config.consumer_max_size < 2**31 - 1:
            legal.add(MAX_SIZE)
        if self._in_unload:
            legal.add(NOT_COORDINATOR)
        if self._failing:
            legal.add(NOT_AVAILABLE)
        if response.error_code not in legal:
            raise InvariantViolation(f"illegal heartbeat answer {response}")

    def _post(self, delay: int, kind: str, payload: object) -> None:
        heapq.heappush(self.network, (self.now + delay, next(self._seq), kind, payload))

    def send(self, m: SimConsumer, event: ConsumerGroupHeartbeat) -> int:
        token = next(self._tokens)
        self.sent[token] = (m.name, m.incarnation, event)
        r = self.rng.random()
        delay = 0 if r < 0.5 or self.calm else self.rng.randint(1, 500) if r < 0.95 else \
            self.rng.randint(2000, 20_000)
        self._post(delay, "req", token)
        return token

    def _deliver_due(self) -> None:
        while self.network and self.network[0][0] <= self.now:
            _, _, kind, payload = heapq.heappop(self.network)
            if kind == "job":
                assert isinstance(payload, tuple)
                self._complete_job(*payload)
            elif kind == "req":
                assert isinstance(payload, int)
                event = self.sent[payload][2]
                if self.rng.random() < 0.04 and not self.calm:
                    self._failed_append(event, payload)
                else:
                    self._absorb(self.coord.handle(event, self.now, payload))
            else:
                assert isinstance(payload, tuple)
                token, response = payload
                name, incarnation, _ = self.sent[token]
                m = next(x for x in self.members if x.name == name)
                if m.incarnation == incarnation:
                    m.inbox.append((token, response))

    def _failed_append(self, event: ConsumerGroupHeartbeat, token: int) -> None:
        lost = self.coord.handle(event, self.now, token)
        if not lost.records:
            self._absorb(lost)
            return
        self.log.append(f"{self.now} append failed")
        self._reload()
        self._failing = True
        self._absorb(Result(replies=tuple(
            Reply(r.token, error_response(event, NOT_AVAILABLE))
            for r in lost.replies if r.token not in self.answered)))
        self._failing = False

    def _reload(self) -> None:
        self._in_unload = True
        self._absorb(self.coord.unload(0))
        self._in_unload = False
        # The jobs of the unloaded shard: some never complete (the node that ran them went
        # away), the others complete late, against the new shard, which must ignore them.
        lost = {j for j in self.pending_jobs if self.job_rng.random() < 0.5}
        self.network = [n for n in self.network if not (n[2] == "job" and n[3][0] in lost)]
        heapq.heapify(self.network)
        self.pending_jobs -= lost
        self._absorb(self.coord.load(0, [(r.key, r.value) for r in self.records], self.now))

    # ------------------------------------------------------------------ member behaviour

    def heartbeat(self, m: SimConsumer, epoch: int, full: bool = False) -> None:
        joining = epoch == 0
        if joining:
            m.owned = {}
        event = ConsumerGroupHeartbeat(
            group_id=CONSUMER_GROUP,
            member_id=m.member_id,
            member_epoch=epoch,
            instance_id=m.instance_id,
            rebalance_timeout_ms=30_000 if joining or full else -1,
            subscribed_topic_names=m.topics if joining or full else None,
            subscribed_topic_regex=m.regex if joining or full else None,
            topic_partitions=tuple(TopicPartitions(t, tuple(sorted(ps)))
                                   for t, ps in sorted(m.owned.items())),
            client_id=m.name,
        )
        m.inflight = self.send(m, event)
        m.next_hb_at = self.now + self.config.consumer_heartbeat_interval_ms

    def restart(self, m: SimConsumer) -> None:
        m.incarnation += 1
        m.member_id = f"{m.name}-{m.incarnation}"
        m.epoch = 0
        m.owned = {}
        m.inbox.clear()
        m.status = "joining"
        self.heartbeat(m, 0)

    def crash(self, m: SimConsumer) -> None:
        m.status = "down"
        m.incarnation += 1
        m.inflight = None
        m.owned = {}
        m.inbox.clear()

    def on_response(self, m: SimConsumer, token: int, r: ConsumerGroupHeartbeatResponse) -> None:
        if token != m.inflight:
            return
        m.inflight = None
        sent = self.sent[token][2]
        if sent.member_epoch < 0:
            self.crash(m)  # it left
            return
        if r.error_code == NONE:
            m.status = "member"
            m.epoch = r.member_epoch
            if r.assignment is not None:
                m.owned = {tp.topic_id: frozenset(tp.partitions) for tp in r.assignment
                           if tp.partitions}
        elif r.error_code in (FENCED_EPOCH, UNKNOWN_MEMBER, GROUP_NOT_FOUND):
            m.epoch = 0
            m.owned = {}
            self.heartbeat(m, 0)
        elif r.error_code == FENCED:
            self.crash(m)
        elif r.error_code == MAX_SIZE:  # not a member: give everything up, try again later
            m.status, m.epoch, m.owned = "joining", 0, {}
            m.next_hb_at = self.now + 5000
        else:  # UNRELEASED_INSTANCE_ID, NOT_COORDINATOR, NOT_AVAILABLE: retry later
            m.next_hb_at = self.now + 1000

    def act(self, m: SimConsumer, churn: bool = True) -> None:
        rng = self.rng
        if m.status == "down":
            if rng.random() < 0.05 or not churn:
                self.restart(m)
            return
        if self.now < m.stalled_until:
            return
        for token, response in m.inbox:
            assert isinstance(response, ConsumerGroupHeartbeatResponse)
            self.on_response(m, token, response)
        m.inbox.clear()
        if m.status == "member" and m.owned and self.commit_rng.random() < 0.2:
            self.commit(m)
        if m.status == "down" or m.inflight is not None:
            return
        p = rng.random() if churn else 1.0
        if p < 0.004:
            self.log.append(f"{self.now} {m.name} crashes")
            self.crash(m)
        elif p < 0.008 and m.status == "member":
            self.log.append(f"{self.now} {m.name} leaves")
            self.heartbeat(m, -2 if m.instance_id and rng.random() < 0.5 else -1)
        elif p < 0.012:
            m.stalled_until = self.now + rng.randint(2000, 60_000)
        elif p < 0.016 and m.status == "member":
            m.regex = rng.choice([None, "t.*", "t[12]"])
            m.topics = () if m.regex else tuple(sorted(rng.sample(["t0", "t1", "t2"], 2)))
            self.heartbeat(m, m.epoch, full=True)
        elif self.now >= m.next_hb_at:
            self.heartbeat(m, m.epoch if m.status == "member" else 0)

    def commit(self, m: SimConsumer) -> None:
        """OffsetCommit v9 of what ``m`` owns, at the epoch of its last answer, delivered at
        once; a heartbeat of ``m`` may be on the way (but not a leave). The coordinator
        accepts it unless it no longer knows the member."""
        if m.inflight is not None and self.sent[m.inflight][2].member_epoch < 0:
            return
        names = {i: n for n, i in self.topic_ids.items()}
        owned = {names[t]: ps for t, ps in m.owned.items() if names[t] in self.live_topics}
        if not owned:
            return
        event = OffsetCommit(CONSUMER_GROUP, tuple(
            CommitTopic(n, tuple(CommitPartition(p, self.now) for p in sorted(ps)))
            for n, ps in sorted(owned.items())), m.epoch, m.member_id, api_version=9)
        group = self.group()
        known = group is not None and m.member_id in group.members
        result = self.coord.handle(event, self.now, next(self._tokens))
        for r in result.records:
            self.records.append(r)
            self.shadow.replay(r.key, r.value)
        (reply,) = result.replies
        assert isinstance(reply.response, OffsetCommitResponse)
        codes = {p.error_code for t in reply.response.topics for p in t.partitions}
        if codes != {NONE if known else UNKNOWN_MEMBER}:
            raise InvariantViolation(
                f"{m.name} committed {owned} at epoch {m.epoch}: {codes} (coordinator's "
                f"member: {group.members.get(m.member_id) if group else None})")

    def change_topics(self) -> None:
        choice = self.rng.random()
        if choice < 0.4:
            topic = self.rng.choice(sorted(self.live_topics))
            self.partitions[topic] += 1
        elif choice < 0.7:
            self.live_topics ^= {"x3"}
        else:
            self.live_topics ^= {"t2"}
        self.log.append(f"{self.now} topics {sorted(self.live_topics)} {self.partitions}")
        self._publish_topics()

    # ------------------------------------------------------------------ invariants

    def check(self) -> None:
        shard = self.coord.shards[0]
        if self.shadow != shard.hard:
            raise InvariantViolation("replaying the records does not give the live state")
        mirrored = {k: d for s in self.coord.shards.values() for k, d in s.deadlines.items()}
        if mirrored != self.timer.deadlines:
            raise InvariantViolation("timer service and shard deadlines disagree")
        for job in shard.jobs.values():
            if job not in self.pending_jobs:
                raise InvariantViolation(f"the shard awaits a job that will never come: {job}")
        group = self.group()
        if group is None:
            return
        if group.members and group.epoch > group.assignment_epoch and not (
                shard.awaits(JobKind.TARGET_ASSIGNMENT, CONSUMER_GROUP)
                or shard.is_scheduled(TimerKind.CONSUMER_ASSIGNMENT, CONSUMER_GROUP)):
            raise InvariantViolation(f"group at epoch {group.epoch}, target at "
                                     f"{group.assignment_epoch}, and no target on its way")
        check_consumer_group(group)

    def check_quiet(self) -> None:
        """Once quiet, the group is Stable and each subscribed partition assigned once."""
        group = self.group()
        live = [m for m in self.members if m.status == "member"]
        if group is None or not live:
            raise InvariantViolation("no live group after the quiet period")
        if group.state.value != "Stable":
            raise InvariantViolation(f"group is {group.state.value} after the quiet period")
        wanted = {
            (self.topic_ids[t], p)
            for t in group.subscribed_topic_names() if t in self.live_topics
            for p in range(self.partitions[t])
        }
        assigned: list[tuple[uuid.UUID, int]] = [
            (t, p) for m in group.members.values() for t, ps in m.assigned.items() for p in ps]
        if sorted(assigned) != sorted(wanted):
            raise InvariantViolation(f"quiet group assigns {sorted(assigned)}, "
                                     f"not {sorted(wanted)}")
        owned = [(t, p) for m in live for t, ps in m.owned.items() for p in ps]
        if sorted(owned) != sorted(wanted):
            raise InvariantViolation("members do not own exactly the assigned partitions")

    # ------------------------------------------------------------------ driver

    def step(self, churn: bool = True) -> None:
        self.timer.advance(self.rng.choice([0, 100, 300, 700, 1500]))
        self._deliver_due()
        for m in self.rng.sample(self.members, len(self.members)):
            self.act(m, churn)
        if churn and self.rng.random() < 0.01:
            self.change_topics()
        if churn and self.rng.random() < 0.003:
            self.log.append(f"{self.now} failover")
            self._reload()
        self._deliver_due()

    def run(self) -> None:
        for i in range(self.steps):
            self.step()
            self.check()
            if i % 50 == 49:
                check_replay(self.coord, self.records)
        self.quiet()

    def quiet(self) -> None:
        """No more churn, no delays: everyone heartbeats until the group settles."""
        for m in self.members:
            m.stalled_until = 0
        while self.network:
            self.timer.advance(max(0, self.network[0][0] - self.now))
            self._deliver_due()
        self.calm = True
        for m in self.members:
            if m.status == "member" and m.inflight is None:
                self.heartbeat(m, m.epoch, full=True)
        for i in range(400):
            self.step(churn=False)
            self.check()
            if i >= 20:
                try:
                    self.check_quiet()
                    break
                except InvariantViolation:
                    pass
        check_replay(self.coord, self.records)
        self.check_quiet()


def check_consumer_group(group: ConsumerGroup, where: str = "") -> None:
    """A consumer group's live state: no member epoch above the group epoch, an assignment
    epoch (KIP-1251) for exactly the partitions a member holds, none above its epoch, and no
    partition held (assigned or pending revocation) by two members."""
    held: dict[tuple[uuid.UUID, int], str] = {}
    for mid, member in group.members.items():
        if member.member_epoch > group.epoch:
            raise InvariantViolation(f"{where}member {mid} epoch {member.member_epoch} > "
                                     f"group epoch {group.epoch}")
        holds = {(t, p) for a in (member.assigned, member.pending_revocation)
                 for t, ps in a.items() for p in ps}
        given = member.assignment_epochs
        if set(given) != holds or not all(
                0 <= e <= max(member.member_epoch, 0) for e in given.values()):
            raise InvariantViolation(f"{where}member {mid} assignment epochs {dict(given)} "
                                     f"for {sorted(holds)} at epoch {member.member_epoch}")
        for assignment in (member.assigned, member.pending_revocation):
            for t, ps in assignment.items():
                for p in ps:
                    if (t, p) in held:
                        raise InvariantViolation(f"{where}{t}-{p} held by {held[(t, p)]} "
                                                 f"and {mid}")
                    held[(t, p)] = mid


def run_consumer_seed(seed: int, steps: int = 250) -> ConsumerSimulation:
    sim = ConsumerSimulation(seed, steps)
    try:
        sim.run()
    except Exception as exc:
        tail = "\n".join(sim.log[-15:])
        raise AssertionError(f"consumer simulation seed {seed} failed: {exc}\n{tail}") from exc
    return sim


# ====================================================================== mixed groups


@dataclass
class SimClassic:
    """A classic-protocol client (eager or cooperative) with the consumer protocol's real
    subscription and assignment bytes; it owns what its last SyncGroup gave it until it
    rejoins (an eager member gives everything up then, a cooperative one keeps it)."""

    name: str
    cooperative: bool
    topics: tuple[str, ...]
    status: str = "down"  # down | joining | syncing | member
    incarnation: int = 0
    member_id: str = ""
    generation: int = -1
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    inflight: int | None = None
    #: when the request in flight was sent
    sent_at: int = 0
    #: the client's own view of its session: the send time of the last request the
    #: coordinator answered without error, plus the session timeout (never later than the
    #: coordinator's deadline, which counts from when it handled that request)
    session_until: int = 0
    next_hb_at: int = 0
    stalled_until: int = 0
    inbox: list[tuple[int, Response]] = field(default_factory=list)


#: the session timeout of the simulated classic clients
CLASSIC_SESSION_MS = 10_000

MIXED_LEGAL: dict[type, set[int]] = {
    JoinGroupResponse: {NONE, MEMBER_ID_REQUIRED, UNKNOWN_MEMBER, REBALANCING, ILLEGAL_GEN,
                        MAX_SIZE},
    # INCONSISTENT_GROUP_PROTOCOL: a SyncGroup sent to the classic group arrives after the
    # upgrade, and the member's first protocol is not the one the classic group chose
    SyncGroupResponse: {NONE, REBALANCING, UNKNOWN_MEMBER, ILLEGAL_GEN, 23},
    HeartbeatResponse: {NONE, REBALANCING, UNKNOWN_MEMBER, ILLEGAL_GEN},
    LeaveGroupResponse: {NONE},
}


class MixedSimulation(ConsumerSimulation):
    """One group with consumer-protocol and classic members (eager and cooperative): it
    starts classic, is upgraded by the first consumer-protocol join, and downgraded when
    the last consumer-protocol member goes. After every step, besides the consumer-group
    invariants: no partition is owned by two current members (a classic member owns its
    last synced assignment, a consumer member its last heartbeat assignment), and a
    classic member owns only what the consumer group says it holds. Once quiet, the group
    is a Stable consumer group and each subscribed partition is owned exactly once."""

    def __init__(self, seed: int, steps: int = 250) -> None:
        #: classic clients removed by the coordinator that have not learnt it yet
        self.zombies: set[str] = set()
        self.classic: list[SimClassic] = []
        super().__init__(seed, steps)
        rng = self.rng
        self.classic = [SimClassic(f"k{i}", rng.random() < 0.5,
                                   tuple(sorted(rng.sample(["t0", "t1", "t2"], rng.randint(1, 3)))))
                        for i in range(rng.randint(1, 3))]
        self.names = {v: k for k, v in self.topic_ids.items()}
        ids = itertools.count(1)
        self.coord.member_id_factory = lambda prefix: f"{prefix}-{next(ids)}"
        for shard in self.coord.shards.values():
            shard.new_member_id = self.coord.member_id_factory

    def _new_member(self, i: int) -> SimConsumer:
        m = super()._new_member(i)
        m.instance_id = None  # static replacement across protocols is not simulated
        return m

    def _absorb(self, result: Result) -> None:
        """Also notes the classic clients the coordinator removed behind their back (a
        session or join timeout while they stalled): such a zombie rejoins with its old
        member id and, if cooperative, the partitions it had (the Java client's way), and
        owns them until its next SyncGroup answer, as with Kafka; the ownership checks
        leave it out until then."""
        for r in result.records:
            if isinstance(r.key, ConsumerGroupMemberMetadataKey) and r.value is None:
                for k in self.classic:
                    if k.member_id == r.key.member_id and k.status != "down":
                        self.zombies.add(k.name)
        super()._absorb(result)

    def all_members(self) -> list[Any]:
        return [*self.members, *self.classic]

    def _check_reply(self, response: Response) -> None:
        if isinstance(response, ConsumerGroupHeartbeatResponse):
            super()._check_reply(response)
            return
        legal = set(MIXED_LEGAL.get(type(response), {NONE}))
        if self._in_unload:
            legal.add(NOT_COORDINATOR)
        if self._failing:
            legal.add(NOT_AVAILABLE)
        if getattr(response, "error_code", NONE) not in legal:
            raise InvariantViolation(f"illegal answer {response}")

    def _deliver_due(self) -> None:
        while self.network and self.network[0][0] <= self.now:
            _, _, kind, payload = heapq.heappop(self.network)
            if kind == "job":
                assert isinstance(payload, tuple)
                self._complete_job(*payload)
            elif kind == "req":
                assert isinstance(payload, int)
                event = self.sent[payload][2]
                if self.rng.random() < 0.03 and not self.calm:
                    self._failed_append(event, payload)
                else:
                    self._absorb(self.coord.handle(event, self.now, payload))
            else:
                assert isinstance(payload, tuple)
                token, response = payload
                name, incarnation, _ = self.sent[token]
                m = next(x for x in self.all_members() if x.name == name)
                if m.incarnation == incarnation:
                    m.inbox.append((token, response))

    # ------------------------------------------------------------------ classic clients

    def csend(self, k: SimClassic, event: Event) -> None:
        token = next(self._tokens)
        self.sent[token] = (k.name, k.incarnation, event)  # type: ignore[assignment]
        delay = 0 if self.calm or self.rng.random() < 0.5 else self.rng.randint(1, 500)
        self._post(delay, "req", token)
        k.inflight, k.sent_at = token, self.now

    def _owned_names(self, k: SimClassic) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(self.names[t], p) for t, ps in sorted(k.owned.items())
                     for p in sorted(ps))

    def cjoin(self, k: SimClassic) -> None:
        if k.member_id and k.owned and self.now >= k.session_until:
            # As librdkafka does when no coordinator answer came within the session timeout:
            # the assignment is lost and the member id forgotten. A client that rejoined
            # with its old id and owned partitions would be taken back as a new member (as
            # Kafka's classicGroupJoinToConsumerGroup creates it) while its partitions
            # have been given to others since its session expired.
            self.log.append(f"{self.now} {k.name} session lapsed: partitions lost")
            k.owned, k.member_id, k.generation = {}, "", -1
        if not k.cooperative:
            k.owned = {}
        k.status = "joining"
        owned = self._owned_names(k)
        metadata = codec.encode_subscription(Subscription(k.topics, owned_partitions=owned))
        names = ("cooperative-sticky", "range") if k.cooperative else ("range",
                                                                       "cooperative-sticky")
        self.csend(k, JoinGroup(CONSUMER_GROUP, k.member_id, "consumer",
                                tuple((n, metadata) for n in names), CLASSIC_SESSION_MS, 20_000,
                                None, k.name))

    def _lose(self, k: SimClassic, reset_id: bool) -> None:
        self.zombies.discard(k.name)
        k.owned = {}
        k.generation = -1
        if reset_id:
            k.member_id = ""
        self.cjoin(k)

    def _leader_assignment(self, r: JoinGroupResponse) -> tuple[tuple[str, bytes], ...]:
        """Round-robin over the members' subscriptions, never handing a partition to a
        member while another member reports owning it (cooperative rule)."""
        subs = {m.member_id: codec.decode_subscription(m.metadata) for m in r.members}
        owner = {tp: mid for mid, s in subs.items() for tp in s.owned_partitions}
        plan: dict[str, list[TopicPartition]] = {mid: [] for mid in sorted(subs)}
        topics = sorted({t for s in subs.values() for t in s.topics} & self.live_topics)
        members = itertools.cycle(sorted(subs))
        for topic in topics:
            for p in range(self.partitions[topic]):
                for _ in range(len(subs)):
                    mid = next(members)
                    if topic in subs[mid].topics:
                        tp = TopicPartition(topic, p)
                        if owner.get(tp, mid) == mid:
                            plan[mid].append(tp)
                        break
        return tuple((mid, codec.encode_assignment(Assignment(tuple(tps))))
                     for mid, tps in plan.items())

    def on_classic(self, k: SimClassic, token: int, r: Response) -> None:
        if token != k.inflight:
            return
        k.inflight = None
        code = getattr(r, "error_code", NONE)
        if code in (NONE, MEMBER_ID_REQUIRED):
            k.session_until = k.sent_at + CLASSIC_SESSION_MS
        if isinstance(r, LeaveGroupResponse):
            self.ccrash(k)
        elif isinstance(r, JoinGroupResponse):
            if code == NONE:
                k.member_id, k.generation, k.status = r.member_id, r.generation_id, "syncing"
                assignments = self._leader_assignment(r) if r.leader == k.member_id else ()
                self.csend(k, SyncGroup(CONSUMER_GROUP, k.generation, k.member_id, assignments,
                                        protocol_type="consumer", protocol_name=r.protocol_name))
            elif code == MEMBER_ID_REQUIRED:
                k.member_id = r.member_id
                self.cjoin(k)
            elif code == UNKNOWN_MEMBER:
                self._lose(k, True)
            else:
                k.status, k.next_hb_at = "retry", self.now + 1000
        elif isinstance(r, SyncGroupResponse):
            if code == NONE:
                got: dict[uuid.UUID, set[int]] = {}
                for tp in codec.decode_assignment(r.assignment).partitions:
                    got.setdefault(self.topic_ids[tp.topic], set()).add(tp.partition)
                new = {t: frozenset(ps) for t, ps in got.items()}
                revoked = any(ps - new.get(t, frozenset()) for t, ps in k.owned.items())
                k.owned, k.status = new, "member"
                self.zombies.discard(k.name)
                if revoked:
                    self.cjoin(k)  # KIP-429: rejoin after revoking
            elif code in (UNKNOWN_MEMBER, ILLEGAL_GEN):
                self._lose(k, code == UNKNOWN_MEMBER)
            else:
                self.cjoin(k)
        elif code == REBALANCING:
            self.cjoin(k)
        elif code in (UNKNOWN_MEMBER, ILLEGAL_GEN):
            self._lose(k, code == UNKNOWN_MEMBER)

    def ccrash(self, k: SimClassic) -> None:
        self.zombies.discard(k.name)
        k.status, k.member_id, k.generation, k.owned = "down", "", -1, {}
        k.incarnation += 1
        k.inflight = None
        k.inbox.clear()

    def cact(self, k: SimClassic, churn: bool) -> None:
        rng = self.rng
        if k.status == "down":
            if rng.random() < 0.05 or not churn:
                self.cjoin(k)
            return
        if self.now < k.stalled_until:
            return
        for token, response in k.inbox:
            self.on_classic(k, token, response)
        k.inbox.clear()
        if k.status == "down" or k.inflight is not None:
            return
        p = rng.random() if churn else 1.0
        if p < 0.004:
            self.log.append(f"{self.now} {k.name} crashes")
            self.ccrash(k)
        elif p < 0.008 and k.status == "member":
            self.log.append(f"{self.now} {k.name} leaves")
            self.csend(k, LeaveGroup(CONSUMER_GROUP, (LeavingMember(k.member_id),)))
        elif p < 0.011:
            k.stalled_until = self.now + rng.randint(2000, 30_000)
        elif k.status == "retry" and self.now >= k.next_hb_at:
            self.cjoin(k)
        elif k.status == "member" and self.now >= k.next_hb_at:
            self.csend(k, Heartbeat(CONSUMER_GROUP, k.generation, k.member_id))
            k.next_hb_at = self.now + 1000

    def step(self, churn: bool = True) -> None:
        self.timer.advance(self.rng.choice([0, 100, 300, 700, 1500]))
        self._deliver_due()
        everyone = self.all_members()
        for m in self.rng.sample(everyone, len(everyone)):
            self.act(m, churn)
        if churn and self.rng.random() < 0.01:
            self.change_topics()
        if churn and self.rng.random() < 0.003:
            self.log.append(f"{self.now} failover")
            self._reload()
        self._deliver_due()

    def change_topics(self) -> None:
        super().change_topics()
        live = {self.topic_ids[t] for t in self.live_topics}
        for k in self.classic:  # a client gives up the partitions of deleted topics
            k.owned = {t: ps for t, ps in k.owned.items() if t in live}

    def act(self, m: Any, churn: bool = True) -> None:
        if isinstance(m, SimClassic):
            self.cact(m, churn)
        else:
            super().act(m, churn)

    # ------------------------------------------------------------------ invariants

    def _current(self) -> set[str]:
        shard = self.coord.shards[0]
        group = self.group()
        if group is not None:
            return set(group.members)
        classic = shard.groups.get(CONSUMER_GROUP)
        return set() if classic is None else set(classic.members)

    def check(self) -> None:
        super().check()
        group = self.group()
        current = self._current()
        owner: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.all_members():
            if m.status == "down" or m.member_id not in current or m.name in self.zombies:
                continue
            if isinstance(m, SimClassic) and group is not None:
                held = group.members[m.member_id]
                for t, ps in m.owned.items():
                    if not ps <= held.assigned.get(t, frozenset()) | \
                            held.pending_revocation.get(t, frozenset()):
                        raise InvariantViolation(f"{m.name} owns {t}-{sorted(ps)} beyond what "
                                                 "the coordinator says it holds")
            for t, ps in m.owned.items():
                for p in ps:
                    if (t, p) in owner:
                        raise InvariantViolation(f"{t}-{p} owned by {owner[(t, p)]} and {m.name}")
                    owner[(t, p)] = m.name

    def check_quiet(self) -> None:
        group = self.group()
        live = [m for m in self.all_members() if m.status == "member"]
        if group is None or not live:
            raise InvariantViolation("no live consumer group after the quiet period")
        if group.state.value != "Stable":
            raise InvariantViolation(f"group is {group.state.value} after the quiet period")
        wanted = {(self.topic_ids[t], p) for t in group.subscribed_topic_names()
                  if t in self.live_topics for p in range(self.partitions[t])}
        assigned = [(t, p) for m in group.members.values() for t, ps in m.assigned.items()
                    for p in ps]
        owned = [(t, p) for m in live for t, ps in m.owned.items() for p in ps]
        if sorted(assigned) != sorted(wanted) or sorted(owned) != sorted(wanted):
            raise InvariantViolation(f"quiet group assigns {sorted(assigned)}, members own "
                                     f"{sorted(owned)}, not {sorted(wanted)}")

    def quiet(self) -> None:
        for k in self.classic:
            k.stalled_until = 0
        super().quiet()


def run_mixed_seed(seed: int, steps: int = 250) -> MixedSimulation:
    sim = MixedSimulation(seed, steps)
    try:
        sim.run()
    except Exception as exc:
        tail = "\n".join(sim.log[-15:])
        raise AssertionError(f"mixed simulation seed {seed} failed: {exc}\n{tail}") from exc
    return sim
