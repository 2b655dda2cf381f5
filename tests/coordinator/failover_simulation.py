"""Deterministic coordinator failover (issue 14), pure: no sockets, no database.

Three nodes (each a :class:`Coordinator` with its own :class:`FakeTimer`, run by the
shipped shard runtime :class:`~samsa.coordinator.runtime.ShardRuntime`) share ONE record
log per ``__consumer_offsets`` partition (:class:`SharedLog`, the database's part).
Ownership of each partition is a lease with an epoch kept beside the log, and every
decision a node takes about it is the shipped control step
(:func:`samsa.cluster.reconcile.reconcile`): it claims what it is preferred for and finds
free, drops what it finds moved, hands off what is preferred elsewhere. The simulation
moves leases at random moments (and at chosen ones in the named scenarios of
``test_failover_simulation.py``) by changing what the database and the placement say:

* graceful hand-off: the shard's preferred owner changes; the owner's step hands it off
  (unload: parked requests get NOT_COORDINATOR, its timers stop), the next owner's step
  claims it with a higher epoch and loads;
* crash: the owner dies (its connections break: the clients see a disconnect), its lease
  lapses after a TTL (FindCoordinator: COORDINATOR_NOT_AVAILABLE), then a live node
  claims it;
* pause: the owner is stopped and its lease lapses; another node claims it at once; the
  paused one wakes up still believing it owns the shard and keeps answering until its step
  notices. Its appends are refused by the log (stale epoch), and the runtime handles that
  as a failed append: unload, answer the lost result's requests COORDINATOR_NOT_AVAILABLE,
  and (it has learned it lost the lease) do not reload. Before it tells a KIP-848 member
  that its group is gone, the node confirms the lease (as the broker's does with the
  database) and, finding it lost, gives the shard up and answers NOT_COORDINATOR.

A node that takes a shard answers COORDINATOR_LOAD_IN_PROGRESS while it loads (loading
takes simulated time), then replays the shared log. Random transient append failures are
handled by the runtime as :mod:`samsa.coordinator.runtime` documents (unload, reload from
the log).

Clients are classic consumers (:mod:`tests.coordinator.failover_consumers` adds KIP-848
members) of two groups on two shards (``eager``: eager rebalancing, some members static
(KIP-345); ``coop``: cooperative, KIP-429): they find the coordinator
(FindCoordinator answers the lease owner as a possibly stale metadata view sees it, or
COORDINATOR_NOT_AVAILABLE), and handle every error as Kafka's Java client does
(``AbstractCoordinator`` / ``ConsumerCoordinator``): see :meth:`FailoverSimulation.on_response`.

Invariants, after every step (:meth:`FailoverSimulation.check`) and on every answer:

* one leader per generation: among the JoinGroup answers of one loaded shard, and among
  the generations written to the log;
* generations only grow: in the log (until a tombstone), in each runtime's live group, and
  as each client sees them (the generations of its successful SyncGroups);
* every successful SyncGroup hands out exactly what the log holds for that generation;
* no partition owned twice: by the clients that are members of the latest generation in the
  log, and in a Stable group's assignment;
* no committed offset lost: each acknowledged commit is still the latest record of its
  partition in the log, and the live owner's state is the replay of the log (so a new
  owner has every commit and group written by the old one);
* timers: each runtime's timer service mirrors its shards' deadlines, and a runtime has no
  timer of a shard it does not hold;
* once quiet, each group is Stable on its owner, every subscribed partition is owned exactly
  once, and every request was answered exactly once.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa import TopicPartition
from samsa.assignors import codec
from samsa.assignors.interface import Assignment, Subscription
from samsa.cluster.reconcile import Claim, Drop, Forget, HandOff, Holder, reconcile
from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
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
    Result,
    ShardStatus,
    SyncGroup,
    TimerKey,
    error_response,
    partition_for,
)
from samsa.coordinator.events import Event
from samsa.coordinator.group import Group
from samsa.coordinator.jobs import Job
from samsa.coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey
from samsa.coordinator.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    Response,
    SyncGroupResponse,
)
from samsa.coordinator.result import Reply
from samsa.coordinator.runtime import Load, ShardRuntime, must_confirm
from tests.coordinator.fake_timer import FakeTimer

NONE, NOT_AVAILABLE, LOADING, NOT_COORDINATOR = 0, 15, 14, 16
GROUP_NOT_FOUND = 69
ILLEGAL_GEN, UNKNOWN_MEMBER, REBALANCING, MEMBER_ID_REQUIRED = 22, 25, 27, 79
FENCED_INSTANCE = 82
DISCONNECT = -1  # not a Kafka code: the connection to the runtime broke
COORDINATOR_LOST = {NOT_AVAILABLE, NOT_COORDINATOR, DISCONNECT}

SHARDS = 2
#: group id -> cooperative; "eager" lives on shard 0, "coop" on shard 1
GROUPS = {"eager": False, "coop": True}
TOPICS = {"t0": 4, "t1": 3, "t2": 2}
RUNTIMES = 3
LEASE_TTL_MS = 2_000
FIND_BACKOFF_MS = 100

_MEMBER = {UNKNOWN_MEMBER, FENCED_INSTANCE} | COORDINATOR_LOST
LEGAL: dict[str, set[int]] = {
    "join": {NONE, MEMBER_ID_REQUIRED, REBALANCING, LOADING} | _MEMBER,
    # a loading shard answers SyncGroup REBALANCE_IN_PROGRESS and Heartbeat NONE (Kafka)
    "sync": {NONE, REBALANCING, ILLEGAL_GEN} | _MEMBER,
    "heartbeat": {NONE, REBALANCING, ILLEGAL_GEN} | _MEMBER,
    "commit": {NONE, REBALANCING, ILLEGAL_GEN, LOADING} | _MEMBER,
    "leave": {NONE, LOADING} | _MEMBER,
    "find": {NONE, DISCONNECT},
}


class InvariantViolation(AssertionError):
    pass


@dataclass(frozen=True)
class Disconnected:
    """What a client sees when its connection to a runtime breaks (not a Kafka answer)."""

    error_code: int = DISCONNECT


def error_of(response: Response | Disconnected) -> int:
    if isinstance(response, OffsetCommitResponse):
        return max((p.error_code for t in response.topics for p in t.partitions), default=NONE)
    if isinstance(response, LeaveGroupResponse) and response.error_code == NONE:
        return max((m.error_code for m in response.members), default=NONE)
    code = getattr(response, "error_code", NONE)
    assert isinstance(code, int)
    return code


# ====================================================================== the shared log


@dataclass
class SharedLog:
    """One ``__consumer_offsets`` partition in the shared store, with its lease: an append
    is refused unless it carries the epoch of the lease holder while the lease is held
    (the database checks it in the same transaction as the write)."""

    partition: int
    records: list[Record] = field(default_factory=list)
    epoch: int = 0
    owner: int | None = None  # runtime holding the lease (None: lapsed, nobody)
    shadow: HardState = field(default_factory=HardState)

    def append(self, records: tuple[Record, ...], runtime: int, epoch: int | None) -> bool:
        if self.owner != runtime or epoch != self.epoch:
            return False
        for r in records:
            self.records.append(r)
            self.shadow.replay(r.key, r.value)
        return True


# ====================================================================== runtimes


class AppendFailed(Exception):
    """A write the shared log refused (``fenced``: a stale epoch) or that failed."""

    def __init__(self, fenced: bool) -> None:
        super().__init__("fenced" if fenced else "failed")
        self.fenced = fenced


class Runtime:
    """One coordinator node: a Coordinator on its own fake timer, run by the shipped shard
    runtime, and the leases it believes it holds."""

    def __init__(self, sim: FailoverSimulation, index: int) -> None:
        self.sim = sim
        self.index = index
        self.incarnation = 0
        self.alive = True
        self.held: dict[int, int] = {}  # partition -> lease epoch it believes it holds
        self.load_ids: dict[int, int] = {}  # partition -> id of its current load
        self.loading: dict[int, Load] = {}  # partition -> its load in progress
        self.pending: set[int] = set()  # tokens handed in and not answered yet
        self._boot()

    def _boot(self) -> None:
        self.timer = FakeTimer(self.sim.now)
        timer = self.timer
        self.timer.on_fire = lambda key, now_ms: self.sim.on_fire(self, timer, key, now_ms)
        self.coord = Coordinator(self.sim.config, self.timer, self.sim.new_member_id)
        self.shards = ShardRuntime(self.coord, self, self, self.index)
        self.sim.booted(self)

    def restart(self) -> None:
        self.incarnation += 1
        self.alive = True
        self.held.clear()
        self.load_ids.clear()
        self.loading.clear()
        self._boot()

    # -- the shard runtime's writer: the shared log, with random transient failures -------
    def append(self, partition: int, records: Any, now_ms: int) -> int:
        sim, log = self.sim, self.sim.logs[partition]
        if not sim.calm and sim.rng.random() < sim.fail_rate:
            raise AppendFailed(fenced=False)
        if not log.append(tuple(records), self.index, self.held.get(partition)):
            raise AppendFailed(fenced=True)
        return len(log.records)

    def epoch(self, partition: int) -> int | None:
        return self.held.get(partition)

    # -- the shard runtime's replies: onto the network -------------------------------------
    def deliver(self, reply: Reply) -> None:
        assert isinstance(reply.token, int)
        if reply.token not in self.sim.answered:  # a crash answered it already
            self.sim.respond(self, reply.token,
                             self.sim.confirmed(self, reply.token, reply.response))

    def fail(self, reply: Reply) -> None:
        assert isinstance(reply.token, int)
        if reply.token not in self.sim.answered:
            event = self.sim.sent[reply.token].event
            assert event is not None
            self.sim.respond(self, reply.token, error_response(event, NOT_AVAILABLE))


# ====================================================================== clients


@dataclass
class Sent:
    client: str
    incarnation: int
    kind: str
    event: Event | None  # None: FindCoordinator
    runtime: int
    runtime_incarnation: int


@dataclass
class Client:
    """A classic consumer (Kafka's Java client behaviour, simplified to its rebalance
    protocol): one JoinGroup/SyncGroup flow, heartbeats and commits beside it."""

    name: str
    group: str
    cooperative: bool
    topics: tuple[str, ...]
    session_ms: int
    rebalance_ms: int
    heartbeat_ms: int
    instance_id: str | None = None  # a static member (KIP-345)
    status: str = "down"  # down | unjoined | joining | syncing | stable
    incarnation: int = 0
    coordinator: int | None = None
    coordinator_incarnation: int = 0
    member_id: str = ""
    generation: int = -1
    need_join: bool = False
    owned: set[TopicPartition] = field(default_factory=set)
    find: int | None = None
    rpc: int | None = None  # the JoinGroup or SyncGroup in flight
    hb: int | None = None
    commit: int | None = None
    retry_at: int = 0
    next_hb_at: int = 0
    stalled_until: int = 0
    seen_generation: int = 0  # highest generation of a successful SyncGroup
    seen_epoch: int = 0  # the group's tombstone count when it was seen
    inbox: list[tuple[int, Response | Disconnected]] = field(default_factory=list)


# ====================================================================== the simulation

#: called with each result after its append, before its replies go out: ``(k, action)``
#: delivers ``k`` replies, runs ``action`` (a fail-over), then delivers the rest if the runtime
#: still lives (a paused runtime that lost its lease still sends what it had computed)
OnResult = Callable[["Runtime", Result], "tuple[int, Callable[[], None]] | None"]
OnEvent = Callable[["FailoverSimulation", str, object], None]


class FailoverSimulation:
    def __init__(self, seed: int, steps: int = 250, churn: bool = True) -> None:
        self.seed = seed
        self.rng = rng = random.Random(seed)
        #: the background jobs' delays, drawn apart so they do not shift the scenario's draws
        self.job_rng = random.Random(seed + 2_000_003)
        self.steps = steps
        self.churn = churn
        self.config = self.configure(CoordinatorConfig(
            offsets_topic_num_partitions=SHARDS,
            initial_rebalance_delay_ms=rng.choice([0, 500, 3000]),
            min_session_timeout_ms=1000,
        ))
        assert [partition_for(g, SHARDS) for g in GROUPS] == [0, 1]
        self.now = 0
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._seq = itertools.count()
        self._loads = itertools.count(1)
        self.network: list[tuple[int, int, str, object]] = []
        self.connections: dict[tuple[str, int, str], int] = {}  # FIFO per connection
        self.logs = [SharedLog(p) for p in range(SHARDS)]
        self.shard_topics = dict.fromkeys(range(SHARDS), "__consumer_offsets")
        self.preferred: dict[int, int | None] = {}  # shard -> the node placement prefers
        self.history: list[list[tuple[int, int | None]]] = [[(0, None)] for _ in range(SHARDS)]
        self.runtimes = [Runtime(self, i) for i in range(RUNTIMES)]
        self.sent: dict[int, Sent] = {}
        self.answered: dict[int, Response | Disconnected] = {}
        self.log: list[str] = []
        self.calm = False
        self.fail_rate = 0.03 if churn else 0.0
        # invariant bookkeeping
        self.log_leaders: dict[str, dict[int, str | None]] = {g: {} for g in GROUPS}
        self.log_generation: dict[str, int] = dict.fromkeys(GROUPS, 0)
        self.tombstones: dict[str, int] = dict.fromkeys(GROUPS, 0)
        self.join_leaders: dict[tuple[int, int], str] = {}  # (load id, generation) -> leader
        self.live_generation: dict[tuple[int, str], int] = {}  # (load id, group) -> generation
        self.last_index: dict[tuple[str, str, int], int] = {}  # offset key -> log index
        self.acked: dict[tuple[str, str, int], int] = {}  # offset key -> acked log index
        self.failovers = 0
        self.commits_acked = 0
        # scenario hooks
        self.on_result: OnResult | None = None
        self.on_event: OnEvent | None = None
        self.clients: list[Client] = []
        for gid, coop in GROUPS.items():
            for i in range(rng.randint(2, 4)):
                self.clients.append(self._new_client(f"{gid}{i}", gid, coop))
        for p in range(SHARDS):
            self.acquire(p, rng.randrange(RUNTIMES), load_ms=0)
        for c in self.clients:
            self.start(c)

    def configure(self, config: CoordinatorConfig) -> CoordinatorConfig:
        """The coordinators' configuration (a subclass adds its own settings)."""
        return config

    def booted(self, r: Runtime) -> None:
        """``r`` (re)started with a fresh coordinator (a subclass hands it topics)."""

    def _new_client(self, name: str, group: str, cooperative: bool) -> Client:
        rng = self.rng
        return Client(
            name, group, cooperative, self._random_topics(),
            session_ms=rng.choice([6000, 10_000]),
            rebalance_ms=rng.choice([8000, 15_000]),
            heartbeat_ms=rng.choice([1000, 2000]),
            # static members in the eager group only: a cooperative static member that
            # restarts between revoking and rejoining replaces itself without a rebalance
            # (Kafka, KIP-345) and the partitions it gave up stay unassigned until the next
            # rebalance, which a quiet group never has
            instance_id=f"{name}-static" if rng.random() < 0.4 and not cooperative else None,
        )

    def _random_topics(self) -> tuple[str, ...]:
        return tuple(sorted(self.rng.sample(sorted(TOPICS), self.rng.randint(1, len(TOPICS)))))

    def new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def note(self, line: str) -> None:
        self.log.append(f"{self.now} {line}")

    def emit(self, what: str, payload: object = None) -> None:
        if self.on_event is not None:
            self.on_event(self, what, payload)

    # ------------------------------------------------------------------ time

    def _post(self, at: int, kind: str, payload: object) -> None:
        heapq.heappush(self.network, (at, next(self._seq), kind, payload))

    def advance(self, ms: int) -> None:
        """Move the one clock forward, interleaving the runtimes' timers and the network
        in time order."""
        target = self.now + ms
        while True:
            t_net = self.network[0][0] if self.network else None
            deadlines = [d for r in self.runtimes if r.alive
                         if (d := r.timer.next_deadline()) is not None]
            t_tim = min(deadlines, default=None)
            candidates = [t for t in (t_net, t_tim) if t is not None and t <= target]
            if not candidates:
                break
            t = max(min(candidates), self.now)
            self.now = t
            if t_tim is not None and t_tim <= t:
                for r in self.rng.sample(self.runtimes, len(self.runtimes)):
                    if r.alive:
                        r.timer.advance(t - r.timer.now_ms)
                continue
            self._sync_timers()
            _, _, kind, payload = heapq.heappop(self.network)
            self._deliver(kind, payload)
        self.now = target
        self._sync_timers()

    def _sync_timers(self) -> None:
        for r in self.runtimes:
            if r.alive and r.timer.now_ms < self.now:
                r.timer.advance(self.now - r.timer.now_ms)

    # ------------------------------------------------------------------ network

    def _delay(self) -> int:
        if self.calm:
            return 0
        x = self.rng.random()
        return 0 if x < 0.5 else self.rng.randint(1, 300) if x < 0.97 else \
            self.rng.randint(1000, 5000)

    def _fifo(self, key: tuple[str, int, str], delay: int) -> int:
        at = max(self.now + delay, self.connections.get(key, 0))
        self.connections[key] = at
        return at

    def send(self, c: Client, kind: str, event: Event | None, runtime: int | None = None) -> int:
        target = c.coordinator if runtime is None else runtime
        assert target is not None
        r = self.runtimes[target]
        inc = r.incarnation if runtime is not None else c.coordinator_incarnation
        token = next(self._tokens)
        self.sent[token] = Sent(c.name, c.incarnation, kind, event, target, inc)
        self._post(self._fifo((c.name, target, "req"), self._delay()), "req", token)
        return token

    def _deliver(self, kind: str, payload: Any) -> None:
        if kind == "req":
            assert isinstance(payload, int)
            self._request(payload)
        elif kind == "resp":
            token, response = payload
            sent = self.sent[token]
            c = self.client(sent.client)
            if c.incarnation == sent.incarnation:
                c.inbox.append((token, response))
        elif kind == "loaded":
            index, partition, load_id = payload
            self._finish_load(self.runtimes[index], partition, load_id)
        elif kind == "lapse":
            partition, epoch = payload
            log = self.logs[partition]
            if log.epoch == epoch and log.owner is not None:
                self.note(f"lease of shard {partition} lapses (epoch {epoch})")
                self._set_owner(partition, None)
        elif kind == "notice":  # a paused node ticks again
            index, partition, epoch = payload
            r = self.runtimes[index]
            if r.alive and r.held.get(partition) == epoch:
                self.tick(r)
        elif kind == "take":
            partition, index, load_ms = payload
            alive = [r.index for r in self.runtimes if r.alive]
            if self.logs[partition].owner is None and alive:
                self.acquire(partition, index if self.runtimes[index].alive
                             else self.rng.choice(alive), load_ms)
        elif kind == "job":
            r, coord, job, outcome = payload
            if r.alive and r.coord is coord:
                self.edge(r, coord.complete(job, outcome, self.now))
        elif kind == "restart":
            r = self.runtimes[payload]
            if not r.alive:
                self.note(f"r{r.index} restarts")
                r.restart()

    def _request(self, token: int) -> None:
        sent = self.sent[token]
        r = self.runtimes[sent.runtime]
        if not r.alive or r.incarnation != sent.runtime_incarnation:
            self.respond(r, token, Disconnected())
            return
        if sent.event is None:  # FindCoordinator: the owner as this node's metadata says
            lag = 0 if self.calm else self.rng.choice([0, 0, 100, 1000])
            owner = self.owner_at(self.logs_index_for(sent), self.now - lag)
            self._post(self._fifo((sent.client, sent.runtime, "resp"), self._delay()), "resp",
                       (token, ("found", owner, self._owner_incarnation(owner))))
            self.answered[token] = HeartbeatResponse(NONE)  # bookkeeping only
            return
        r.pending.add(token)
        self.edge(r, r.coord.handle(sent.event, self.now, token))
        self.emit("handled", (r, token))

    def logs_index_for(self, sent: Sent) -> int:
        return partition_for(self.client(sent.client).group, SHARDS)

    def _owner_incarnation(self, owner: int | None) -> int:
        return -1 if owner is None else self.runtimes[owner].incarnation

    def owner_at(self, partition: int, at: int) -> int | None:
        owner: int | None = None
        for t, o in self.history[partition]:
            if t <= at:
                owner = o
        return owner

    def respond(self, r: Runtime, token: int, response: Response | Disconnected) -> None:
        if token in self.answered:
            raise InvariantViolation(f"token {token} answered twice")
        self.answered[token] = response
        r.pending.discard(token)
        sent = self.sent[token]
        self._check_answer(r, sent, response)
        self.emit("answer", (r, token, response))
        at = self._fifo((sent.client, sent.runtime, "resp"), self._delay())
        self._post(at, "resp", (token, response))

    # ------------------------------------------------------------------ the edge

    def on_fire(self, r: Runtime, timer: FakeTimer, key: TimerKey, now_ms: int) -> None:
        if r.alive and r.timer is timer:
            self.edge(r, r.coord.fire(key, now_ms))

    def edge(self, r: Runtime, result: Result) -> None:
        """The runtime appends the result's records to the shared log, then its replies go
        out; a refused or failed append is recovered as the runtime's rules say."""
        partitions = {rec.partition for rec in result.records}
        assert len(partitions) <= 1, "one call writes to one shard here"
        if partitions:
            (p,) = partitions
            try:
                r.shards.write(result, self.now)
            except AppendFailed as exc:
                self._failed_append(r, p, result, exc.fenced)
                return
            log = self.logs[p]
            self._appended(p, len(log.records) - len(result.records), result)
        hook = self.on_result(r, result) if self.on_result is not None else None
        if hook is None:
            r.shards.deliver(result)
        else:
            for i, reply in enumerate(result.replies):
                if i == hook[0]:
                    hook[1]()
                r.deliver(reply)
            if hook[0] >= len(result.replies):
                hook[1]()
        for job in result.jobs:
            self._start_job(r, job)

    def _start_job(self, r: Runtime, job: Job) -> None:
        """As the broker's edge (KIP-1263): an inline job completes at once, an offloaded one
        a little later on the coordinator that asked for it, if it still runs."""
        if not job.offload:
            self.edge(r, r.coord.complete(job, job.run(), self.now))
            return
        delay = 0 if self.calm else self.job_rng.choice([0, 0, 100, 700, 3000])
        self._post(self.now + delay, "job", (r, r.coord, job, job.run()))

    def confirmed(self, r: Runtime, token: int, response: Response) -> Response:
        """As the broker's edge, a runtime confirms its lease (the database's row here: the
        log's owner and epoch) before it tells a member its group is gone; one that lost
        it gives the shard up and answers NOT_COORDINATOR."""
        event = self.sent[token].event
        if event is None or not must_confirm(event, response):
            return response
        p = partition_for(event.group_id, SHARDS)
        log = self.logs[p]
        if log.owner == r.index and log.epoch == r.held.get(p):
            return response
        self.note(f"r{r.index} finds it lost shard {p}")
        self.give_up(r, p)
        return error_response(event, NOT_COORDINATOR)

    def _failed_append(self, r: Runtime, p: int, lost: Result, fenced: bool) -> None:
        self.note(f"r{r.index} append to shard {p} {'fenced' if fenced else 'failed'}")
        self.emit("append_failed", (r, p, fenced))
        r.load_ids.pop(p, None)
        if fenced:
            r.held.pop(p, None)  # it learned that its lease is gone: no reload
        for load in r.shards.failed([p], lost, self.now):
            self._start_load(r, load)

    def _appended(self, p: int, start: int, result: Result) -> None:
        for i, rec in enumerate(result.records, start):
            key = rec.key
            if isinstance(key, OffsetCommitKey):
                okey = (key.group, key.topic, key.partition)
                self.last_index[okey] = i
                if rec.value is None and okey in self.acked:
                    raise InvariantViolation(f"acknowledged commit {okey} deleted")
            elif isinstance(key, GroupMetadataKey):
                self._check_group_record(key.group, rec.value)  # type: ignore[arg-type]
        for reply in result.replies:
            if isinstance(reply.response, OffsetCommitResponse):
                sent = self.sent[reply.token]  # type: ignore[index]
                assert isinstance(sent.event, OffsetCommit)
                for t in reply.response.topics:
                    for part in t.partitions:
                        if part.error_code == NONE:
                            okey = (sent.event.group_id, t.name, part.partition)
                            self.acked[okey] = self.last_index[okey]
                            self.commits_acked += 1

    def _check_group_record(self, group: str, value: GroupMetadataValue | None) -> None:
        if value is None:
            self.tombstones[group] += 1
            self.log_generation[group] = 0
            self.log_leaders[group].clear()
            return
        if value.generation < self.log_generation[group]:
            raise InvariantViolation(
                f"{group}: log generation went back {self.log_generation[group]} -> "
                f"{value.generation}")
        self.log_generation[group] = value.generation
        # a static leader may be replaced within its generation: compare instance ids
        leader = next((m.group_instance_id or m.member_id for m in value.members
                       if m.member_id == value.leader), value.leader)
        known = self.log_leaders[group].setdefault(value.generation, leader)
        if known != leader:
            raise InvariantViolation(f"{group}: two leaders of generation {value.generation} "
                                     f"in the log: {known}, {leader}")

    # ------------------------------------------------------------------ ownership

    def _set_owner(self, p: int, owner: int | None) -> None:
        self.logs[p].owner = owner
        self.history[p].append((self.now, owner))

    def place(self, topics: Mapping[int, str], live: Sequence[int]) -> dict[int, int | None]:
        """The simulation's placement: the preferred owner it chose for each shard, if live
        (a real node hashes the live nodes: samsa.cluster.placement)."""
        out: dict[int, int | None] = {}
        for p in topics:
            owner = self.preferred.get(p)
            out[p] = owner if owner is not None and owner in live else None
        return out

    def tick(self, r: Runtime, load_ms: int | None = None) -> None:
        """``r`` runs the shipped control step on the shared leases and carries its actions
        out: drop (unload), hand off (unload, then the lease names the target with a higher
        epoch, whose step claims it at once), claim (a compare-and-set on the epoch read,
        which bumps it; then load for ``load_ms``)."""
        live = [x.index for x in self.runtimes if x.alive]
        leases = {p: (log.owner, log.epoch) for p, log in enumerate(self.logs)}
        me = Holder(r.index, LEASE_TTL_MS, dict(r.held), self.now / 1000)
        for action in reconcile(me, live, leases, self.now / 1000, topics=self.shard_topics,
                                place=self.place):
            if isinstance(action, Drop | Forget):
                self.note(f"r{r.index} notices it lost shard {action.pid}")
                self.give_up(r, action.pid)
            elif isinstance(action, HandOff):
                self.note(f"r{r.index} hands shard {action.pid} to r{action.target}")
                self.give_up(r, action.pid)
                log = self.logs[action.pid]
                log.epoch += 1
                self._set_owner(action.pid, action.target)
                self.tick(self.runtimes[action.target], load_ms)
            elif isinstance(action, Claim):
                for p, epoch in action.leases:
                    log = self.logs[p]
                    owner = log.owner
                    if log.epoch == epoch and (owner is None or owner == r.index
                                               or owner not in live):
                        self._claimed(r, p, load_ms)

    def _claimed(self, r: Runtime, p: int, load_ms: int | None) -> None:
        log = self.logs[p]
        log.epoch += 1
        self._set_owner(p, r.index)
        self.note(f"r{r.index} takes shard {p} (epoch {log.epoch})")
        r.held[p] = log.epoch
        self._start_load(r, r.shards.gain(p, self.now, lease_epoch=log.epoch), load_ms)

    def acquire(self, p: int, index: int, load_ms: int | None = None) -> None:
        """Runtime ``index`` becomes shard ``p``'s preferred owner and the lease lapses if
        another holds it (its holder stopped renewing): ``index``'s step claims it and
        loads."""
        log = self.logs[p]
        if log.owner is not None and log.owner != index:
            log.owner = None  # lapsed: the claim below names the new owner
        self.preferred[p] = index
        self.tick(self.runtimes[index], load_ms)

    def _start_load(self, r: Runtime, load: Load, load_ms: int | None = None) -> None:
        p = load.partition
        load_id = next(self._loads)
        r.load_ids[p] = load_id
        r.loading[p] = load
        if load_ms is None:
            load_ms = 0 if self.calm else self.rng.choice([0, 200, 1000, 3000])
        self._post(self.now + load_ms, "loaded", (r.index, p, load_id))

    def _finish_load(self, r: Runtime, p: int, load_id: int) -> None:
        if not r.alive or r.load_ids.get(p) != load_id:
            return
        records = self.logs[p].records
        result = r.shards.finish(r.loading.pop(p), ((x.key, x.value) for x in records),
                                 self.now)
        if result is None:
            return
        self.note(f"r{r.index} loaded shard {p} ({len(records)} records)")
        self.edge(r, result)
        self.emit("loaded", (r, p))

    def give_up(self, r: Runtime, p: int) -> None:
        """``r`` unloads shard ``p`` (it knows it is no longer the owner)."""
        r.held.pop(p, None)
        r.load_ids.pop(p, None)
        r.loading.pop(p, None)
        r.shards.lose(p)

    def crash(self, r: Runtime) -> None:
        """The runtime dies: connections break, timers and memory are gone; its leases lapse
        after the TTL; it restarts empty later."""
        self.note(f"r{r.index} crashes")
        r.alive = False
        r.timer.deadlines.clear()
        for token in sorted(r.pending):
            if token not in self.answered:
                self.respond(r, token, Disconnected())
        r.pending.clear()
        for p, log in enumerate(self.logs):
            if log.owner == r.index:
                self._post(self.now + LEASE_TTL_MS, "lapse", (p, log.epoch))
        r.held.clear()
        r.load_ids.clear()
        self._post(self.now + self.rng.randint(1000, 8000), "restart", r.index)

    def fail_over(self, p: int, how: str, to: int | None = None,
                  load_ms: int | None = None) -> None:
        """Move shard ``p``: ``handoff`` (graceful), ``crash`` (the owner dies; a live runtime
        takes the lease once it lapsed) or ``pause`` (the lease is taken at once; the old
        owner keeps serving, fenced on writes, until it notices)."""
        self.failovers += 1
        log = self.logs[p]
        old = log.owner
        others = [r.index for r in self.runtimes if r.alive and r.index != old]
        if to is None and others:
            to = self.rng.choice(others)
        self.note(f"fail-over of shard {p} ({how}) from r{old} to r{to}")
        if how == "crash" and old is not None:
            if self.runtimes[old].alive:
                self.crash(self.runtimes[old])
            if to is not None:
                self._post(self.now + LEASE_TTL_MS, "take", (p, to, load_ms))
            return
        if how == "handoff" and old is not None and self.runtimes[old].alive and \
                to is not None:
            self.preferred[p] = to  # the owner's step hands it off, the target's claims it
            self.tick(self.runtimes[old], load_ms)
            return
        if how == "handoff" and old is not None and self.runtimes[old].alive:
            self.give_up(self.runtimes[old], p)
        elif how == "pause" and old is not None and self.runtimes[old].alive:
            stale = self.rng.choice([0, 500, 3000, 10_000])
            self._post(self.now + stale, "notice", (old, p, self.runtimes[old].held.get(p)))
        if to is not None:
            self.acquire(p, to, load_ms)
        else:
            self.preferred[p] = None
            self._set_owner(p, None)

    def client(self, name: str) -> Client:
        return next(c for c in self.clients if c.name == name)

    def group_at(self, r: Runtime, group: str) -> Group | None:
        shard = r.coord.shard_for(group)
        if shard is None or shard.status is not ShardStatus.ACTIVE:
            return None
        return shard.groups.get(group)

    def owner_runtime(self, p: int) -> Runtime | None:
        """The runtime holding the current lease of ``p`` with the shard loaded."""
        log = self.logs[p]
        if log.owner is None:
            return None
        r = self.runtimes[log.owner]
        shard = r.coord.shards.get(p)
        if not r.alive or r.held.get(p) != log.epoch or shard is None \
                or shard.status is not ShardStatus.ACTIVE:
            return None
        return r

    # ------------------------------------------------------------------ clients

    def protocols(self, c: Client) -> tuple[tuple[str, bytes], ...]:
        owned = tuple(sorted(c.owned)) if c.cooperative else ()
        meta = codec.encode_subscription(Subscription(c.topics, owned_partitions=owned))
        return (("cooperative-sticky" if c.cooperative else "range", meta),)

    def coordinator_unknown(self, c: Client) -> None:
        """Kafka's ``markCoordinatorUnknown``: the connection is closed, requests in flight
        fail, a join or sync in flight will be retried after rediscovery."""
        if c.rpc is not None:
            c.need_join = True
        c.coordinator = None
        c.rpc = c.hb = c.commit = None

    def reset(self, c: Client, member_id: bool) -> None:
        """``resetStateAndGeneration``: the generation (and maybe the member id) is gone and
        the partitions are lost (``onPartitionsLost``)."""
        c.generation = -1
        if member_id:
            c.member_id = ""
        c.owned = set()
        c.status = "unjoined"
        c.need_join = True

    def join(self, c: Client) -> None:
        if not c.cooperative:
            if c.owned and c.status == "stable" and c.generation > 0:
                self._commit(c)  # eager onJoinPrepare: commit, then revoke everything
            c.owned = set()
        c.need_join = False
        c.status = "joining"
        c.rpc = self.send(c, "join", JoinGroup(
            c.group, c.member_id, "consumer", self.protocols(c), c.session_ms, c.rebalance_ms,
            group_instance_id=c.instance_id, client_id=c.name, client_host="/sim"))

    def _commit(self, c: Client) -> None:
        by_topic: dict[str, list[CommitPartition]] = {}
        for tp in sorted(c.owned):
            by_topic.setdefault(tp.topic, []).append(CommitPartition(tp.partition, self.now))
        topics = tuple(CommitTopic(t, tuple(ps)) for t, ps in by_topic.items())
        c.commit = self.send(c, "commit", OffsetCommit(c.group, topics, c.generation,
                                                       c.member_id, c.instance_id))

    def assign(self, c: Client, r: JoinGroupResponse) -> tuple[tuple[str, bytes], ...]:
        """Round-robin over the members' subscriptions; a partition another member reports
        owning is withheld (cooperative: revoked first, assigned in the next generation)."""
        subs = {m.member_id: codec.decode_subscription(m.metadata) for m in r.members}
        owner = {tp: mid for mid, s in subs.items() for tp in s.owned_partitions}
        plan: dict[str, list[TopicPartition]] = {mid: [] for mid in sorted(subs)}
        members = itertools.cycle(sorted(subs))
        for topic in sorted({t for s in subs.values() for t in s.topics}):
            for p in range(TOPICS[topic]):
                for _ in range(len(subs)):
                    mid = next(members)
                    if topic in subs[mid].topics:
                        tp = TopicPartition(topic, p)
                        if owner.get(tp, mid) == mid:
                            plan[mid].append(tp)
                        break
        return tuple((mid, codec.encode_assignment(Assignment(tuple(tps))))
                     for mid, tps in plan.items())

    def on_response(self, c: Client, token: int, response: object) -> None:
        """Kafka's client, error by error (``AbstractCoordinator``, ``ConsumerCoordinator``):
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a broken connection: rediscover (a
        join/sync is retried there, heartbeats continue with the same generation);
        COORDINATOR_LOAD_IN_PROGRESS: retry after a back-off; REBALANCE_IN_PROGRESS: rejoin
        keeping the generation; ILLEGAL_GENERATION: partitions lost, rejoin with the member
        id; UNKNOWN_MEMBER_ID: lost, rejoin without it; a commit is refused unless Stable."""
        sent = self.sent[token]
        if sent.kind == "find":
            self.found(c, token, response)
            return
        assert isinstance(response, Response | Disconnected)
        code = error_of(response)
        if token not in (c.rpc, c.hb, c.commit):
            return  # a stale answer (its connection was closed meanwhile)
        if token == c.hb:
            c.hb = None
        if token == c.commit:
            c.commit = None
        if token == c.rpc:
            c.rpc = None
        if code == FENCED_INSTANCE:  # fatal for the Java consumer
            self.note(f"{c.name} fenced by another instance")
            self.stop(c)
            return
        if code in COORDINATOR_LOST:
            if sent.kind in ("join", "sync"):
                c.need_join = True
            self.coordinator_unknown(c)
            return
        if sent.kind == "join":
            assert isinstance(response, JoinGroupResponse)
            self._on_join(c, response)
        elif sent.kind == "sync":
            assert isinstance(response, SyncGroupResponse)
            self._on_sync(c, sent, response)
        elif code == REBALANCING and sent.kind == "heartbeat" and c.status == "stable":
            c.need_join = True
        elif code == ILLEGAL_GEN and c.generation == getattr(sent.event, "generation_id", None):
            self.reset(c, member_id=False)
        elif code == UNKNOWN_MEMBER and c.member_id == getattr(sent.event, "member_id", None):
            self.reset(c, member_id=True)

    def find_coordinator(self, c: Any) -> None:
        """Ask a live runtime which one coordinates ``c``'s group (any kind of client),
        unless a question is out or ``c`` backs off."""
        if c.find is None and self.now >= c.retry_at:
            alive = [r.index for r in self.runtimes if r.alive]
            if alive:
                c.find = self.send(c, "find", None, runtime=self.rng.choice(alive))

    def found(self, c: Any, token: int, response: object) -> None:
        """A FindCoordinator answer: the owner, or retry after a back-off."""
        if token != c.find:
            return
        c.find = None
        if isinstance(response, tuple) and response[1] is not None:
            c.coordinator, c.coordinator_incarnation = response[1], response[2]
        else:
            c.retry_at = self.now + FIND_BACKOFF_MS

    def _on_join(self, c: Client, r: JoinGroupResponse) -> None:
        code = r.error_code
        if code == NONE:
            c.member_id, c.generation = r.member_id, r.generation_id
            leads = r.leader == c.member_id and not r.skip_assignment
            assignments = self.assign(c, r) if leads else ()
            c.status = "syncing"
            c.rpc = self.send(c, "sync", SyncGroup(
                c.group, c.generation, c.member_id, assignments, c.instance_id,
                protocol_type="consumer", protocol_name=r.protocol_name))
        elif code == MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
            self.join(c)
        elif code == UNKNOWN_MEMBER:
            self.reset(c, member_id=True)
        else:  # LOAD_IN_PROGRESS, REBALANCE_IN_PROGRESS: retry after a back-off
            c.need_join = True
            c.retry_at = self.now + self.rng.choice([100, 300])

    def _on_sync(self, c: Client, sent: Sent, r: SyncGroupResponse) -> None:
        code = r.error_code
        if code == NONE:
            assert isinstance(sent.event, SyncGroup)
            new = set(codec.decode_assignment(r.assignment).partitions)
            revoked = c.owned - new
            c.owned = new
            c.status = "stable"
            c.need_join = bool(revoked)  # KIP-429: rejoin after revoking
            c.next_hb_at = self.now + c.heartbeat_ms
            self._client_saw(c, sent.event.generation_id)
        elif code == REBALANCING:
            c.need_join = True
            c.status = "unjoined"
        elif code in (UNKNOWN_MEMBER, ILLEGAL_GEN):
            self.reset(c, member_id=code == UNKNOWN_MEMBER)

    def _client_saw(self, c: Client, generation: int) -> None:
        if c.seen_epoch != self.tombstones[c.group]:
            c.seen_epoch, c.seen_generation = self.tombstones[c.group], 0
        if generation < c.seen_generation:
            raise InvariantViolation(f"{c.name} saw generation {generation} after "
                                     f"{c.seen_generation}")
        c.seen_generation = generation

    def start(self, c: Client) -> None:
        c.incarnation += 1
        c.status, c.member_id, c.generation, c.owned = "unjoined", "", -1, set()
        c.need_join, c.coordinator = True, None
        c.find = c.rpc = c.hb = c.commit = None
        c.inbox.clear()

    def stop(self, c: Client) -> None:
        c.status = "down"
        c.incarnation += 1
        c.owned = set()
        c.find = c.rpc = c.hb = c.commit = None
        c.inbox.clear()

    def turn(self, c: Any, start: Callable[[Any], None],
             handle: Callable[[Any, int, Any], None], churn: Callable[[Any], bool]) -> bool:
        """What every client (classic or not) does first in its turn: start when down (now
        and then; always once quiet), nothing while stalled, ``handle`` its answers, maybe
        ``churn``, find its coordinator. False when its turn ends there."""
        if c.status == "down":
            if (self.churn and self.rng.random() < 0.03) or self.calm:
                self.note(f"{c.name} starts")
                start(c)
            return False
        if self.now < c.stalled_until:
            return False
        inbox, c.inbox = c.inbox, []
        for token, response in inbox:
            handle(c, token, response)
        if c.status in ("down", "fatal"):  # stopped by an answer
            return False
        if self.churn and not self.calm and churn(c):
            return False
        if c.coordinator is None:
            self.find_coordinator(c)
            return False
        return True

    def act(self, c: Client) -> None:
        rng = self.rng
        if not self.turn(c, self.start, self.on_response, self._churn_client):
            return
        if c.need_join and c.rpc is None and self.now >= c.retry_at:
            self.join(c)
        if c.status != "stable":
            return
        if self.now >= c.next_hb_at and c.hb is None:
            c.hb = self.send(c, "heartbeat", Heartbeat(c.group, c.generation, c.member_id,
                                                       c.instance_id))
            c.next_hb_at = self.now + c.heartbeat_ms
        if c.owned and c.commit is None and rng.random() < 0.1:
            self._commit(c)

    def _churn_client(self, c: Client) -> bool:
        p = self.rng.random()
        if p < 0.003:
            self.note(f"{c.name} crashes")
            self.stop(c)
            return True
        if p < 0.006 and c.coordinator is not None and c.member_id:
            self.note(f"{c.name} leaves")
            self.send(c, "leave", LeaveGroup(c.group, (LeavingMember(c.member_id,
                                                                     c.instance_id),)))
            self.stop(c)
            return True
        if p < 0.01:
            c.stalled_until = self.now + self.rng.randint(1000, 20_000)
            self.note(f"{c.name} stalls until {c.stalled_until}")
            return True
        if p < 0.013 and c.status == "stable":
            c.topics = self._random_topics()
            c.owned = {tp for tp in c.owned if tp.topic in c.topics}
            c.need_join = True
        return False

    # ------------------------------------------------------------------ invariants

    def _check_answer(self, r: Runtime, sent: Sent, response: Response | Disconnected) -> None:
        code = error_of(response)
        if code not in LEGAL[sent.kind]:
            raise InvariantViolation(f"illegal {sent.kind} answer {response} from r{r.index}")
        if isinstance(response, JoinGroupResponse) and code == NONE:
            assert isinstance(sent.event, JoinGroup)
            self._check_join_ok(r, sent.event.group_id, response)
        if isinstance(response, SyncGroupResponse) and code == NONE:
            assert isinstance(sent.event, SyncGroup)
            self._check_sync_ok(sent.event, response)

    def _check_join_ok(self, r: Runtime, group: str, response: JoinGroupResponse) -> None:
        load_id = r.load_ids.get(partition_for(group, SHARDS))
        if load_id is None:
            raise InvariantViolation(f"join answered by r{r.index} without a loaded shard")
        live = self.group_at(r, group)
        if live is None or live.generation != response.generation_id:
            raise InvariantViolation("join answered with a generation that is not the group's")
        member = live.members.get(response.leader)
        leader = response.leader if member is None or member.group_instance_id is None \
            else member.group_instance_id
        known = self.join_leaders.setdefault((load_id, response.generation_id), leader)
        if known != leader:
            raise InvariantViolation(f"two leaders of generation {response.generation_id}: "
                                     f"{known}, {leader}")

    def _check_sync_ok(self, event: SyncGroup, response: SyncGroupResponse) -> None:
        """A successful SyncGroup hands out exactly what the log holds for the generation."""
        for rec in reversed(self.logs[partition_for(event.group_id, SHARDS)].records):
            v = rec.value
            if rec.key == GroupMetadataKey(event.group_id) and isinstance(v, GroupMetadataValue) \
                    and v.generation == event.generation_id:
                member = next((m for m in v.members if m.member_id == event.member_id), None)
                if member is not None and member.assignment == response.assignment:
                    return
        raise InvariantViolation(f"sync of {event.member_id} in generation "
                                 f"{event.generation_id} answered with an assignment the log "
                                 "does not hold")

    def latest_record(self, group: str) -> GroupMetadataValue | None:
        for rec in reversed(self.logs[partition_for(group, SHARDS)].records):
            if rec.key == GroupMetadataKey(group):
                assert rec.value is None or isinstance(rec.value, GroupMetadataValue)
                return rec.value
        return None

    def check(self) -> None:
        shard_of = {gid: partition_for(gid, SHARDS) for gid in {k[0] for k in self.acked}}
        for p, log in enumerate(self.logs):
            owner = self.owner_runtime(p)
            if owner is not None and owner.coord.shards[p].hard != log.shadow:
                raise InvariantViolation(f"r{owner.index}'s shard {p} is not the log's replay")
            for gid, topic, part in self.acked:
                if shard_of[gid] == p and (topic, part) not in log.shadow.offsets.get(gid, {}):
                    raise InvariantViolation(f"acknowledged commit {gid}/{topic}-{part} lost")
        for r in self.runtimes:
            if not r.alive:
                continue
            mirrored = {k: d for s in r.coord.shards.values() for k, d in s.deadlines.items()}
            if mirrored != r.timer.deadlines:
                raise InvariantViolation(f"r{r.index}: timer service and shards disagree")
            if any(k.partition not in r.coord.shards for k in r.timer.deadlines):
                raise InvariantViolation(f"r{r.index} runs timers of a shard it gave up")
            for p, shard in r.coord.shards.items():
                if shard.status is not ShardStatus.ACTIVE:
                    continue
                for gid, group in shard.groups.items():
                    self._check_live_group(r, p, gid, group)
        for gid in GROUPS:
            self._check_ownership(gid)

    def _check_live_group(self, r: Runtime, p: int, gid: str, group: Group) -> None:
        key = (r.load_ids[p], gid)
        if group.generation < self.live_generation.get(key, 0):
            raise InvariantViolation(f"r{r.index}: {gid} generation went back")
        self.live_generation[key] = group.generation
        if group.members and group.leader_id not in group.members:
            raise InvariantViolation("leader is not a member")
        if group.state is GroupState.STABLE:
            seen: set[TopicPartition] = set()
            for m in group.members.values():
                for tp in codec.decode_assignment(m.assignment).partitions:
                    if tp in seen:
                        raise InvariantViolation(f"{gid}: {tp} assigned twice in a Stable group")
                    seen.add(tp)

    def _check_ownership(self, gid: str) -> None:
        latest = self.latest_record(gid)
        current = set() if latest is None else {m.member_id for m in latest.members}
        holder: dict[TopicPartition, str] = {}
        generation = 0 if latest is None else latest.generation
        for c in self.clients:
            if c.group != gid or c.status == "down" or c.member_id not in current:
                continue
            if c.instance_id is not None and c.seen_generation < generation:
                # KIP-345, as in Kafka: a static member that misses a rebalance stays in the
                # group, the leader sees its last subscription and may hand its partitions
                # to others; it learns at its next heartbeat (ILLEGAL_GENERATION)
                continue
            for tp in c.owned:
                if tp in holder:
                    raise InvariantViolation(f"{gid}: {tp} owned by {holder[tp]} and {c.name}")
                holder[tp] = c.name

    def check_quiet(self) -> None:
        for gid in GROUPS:
            owner = self.owner_runtime(partition_for(gid, SHARDS))
            group = None if owner is None else self.group_at(owner, gid)
            if group is None or group.state is not GroupState.STABLE:
                raise InvariantViolation(f"{gid} is not Stable on its owner after the quiet "
                                         f"period ({None if group is None else group.state})")
            clients = [c for c in self.clients if c.group == gid]
            if any(c.status != "stable" or c.generation != group.generation or c.need_join
                   for c in clients):
                raise InvariantViolation(f"{gid}: a client is not in the Stable generation")
            if {c.member_id for c in clients} != set(group.members):
                raise InvariantViolation(f"{gid}: members and clients differ")
            wanted = sorted(TopicPartition(t, p) for t in {t for c in clients for t in c.topics}
                            for p in range(TOPICS[t]))
            owned = sorted(tp for c in clients for tp in c.owned)
            if owned != wanted:
                raise InvariantViolation(f"{gid}: clients own {owned}, not {wanted}")

    # ------------------------------------------------------------------ driver

    def step(self) -> None:
        self.advance(self.rng.choice([0, 100, 300, 700, 1500]))
        for c in self.rng.sample(self.clients, len(self.clients)):
            self.act(c)
        if self.churn and not self.calm:
            self._churn_runtimes()
        self.advance(0)

    def _churn_runtimes(self) -> None:
        rng = self.rng
        for p, log in enumerate(self.logs):
            if log.owner is None:
                if rng.random() < 0.2:
                    alive = [r.index for r in self.runtimes if r.alive]
                    if alive:
                        self.acquire(p, rng.choice(alive))
            elif rng.random() < 0.02:
                self.fail_over(p, rng.choice(["handoff", "crash", "pause", "pause"]))

    def quiet(self, limit: int = 600) -> None:
        """No more faults: every runtime up, every shard owned, every client running; the
        groups must settle."""
        self.calm = True
        for c in self.clients:
            c.stalled_until = 0
        for i in range(limit):
            for r in self.runtimes:
                if not r.alive:
                    r.restart()
            for p, log in enumerate(self.logs):
                if log.owner is None or self.runtimes[log.owner].held.get(p) != log.epoch:
                    self.acquire(p, self.rng.randrange(RUNTIMES))
            self.step()
            self.check()
            if i >= 10:
                try:
                    self.check_quiet()
                    return
                except InvariantViolation:
                    pass
        self.check_quiet()

    def drain(self) -> None:
        """After the quiet period: every client stops; once the network is empty every
        request was answered exactly once."""
        for c in self.clients:
            self.stop(c)
        self.advance(60_000)
        missing = sorted(t for t in self.sent if t not in self.answered)
        if missing:
            raise InvariantViolation(f"requests never answered: {missing[:5]}")

    def run(self) -> None:
        for _ in range(self.steps):
            self.step()
            self.check()
        self.quiet()
        self.drain()


def run_failover_seed(seed: int, steps: int = 250,
                      kind: type[FailoverSimulation] | None = None) -> FailoverSimulation:
    """Run seed ``seed`` of ``kind`` (this simulation, or one extending it) to the end."""
    sim = (kind or FailoverSimulation)(seed, steps)
    try:
        sim.run()
    except Exception as exc:
        tail = "\n".join(sim.log[-20:])
        raise AssertionError(f"{type(sim).__name__} seed {seed} failed: {exc}\n{tail}") \
            from exc
    return sim


# ====================================================================== named scenarios

#: seed 001's steps of a rebalance at which the coordinator fails (see the test module)
STEPS = ("notified", "some_heartbeats", "some_joins", "generation_chosen",
         "generation_written", "some_join_responses")
HOWS = ("handoff", "crash", "pause")
LOAD_MS = 1500


@dataclass
class ScenarioRun:
    sim: FailoverSimulation
    group: str
    base_generation: int  # the Stable generation before the rebalance
    fired_at: int | None = None
    told: int = 0  # heartbeats answered REBALANCE_IN_PROGRESS before the fail-over
    written: int | None = None  # the generation the old owner wrote, if any
    loaded: list[int] = field(default_factory=list)  # generations the new owner loaded
    answers: list[tuple[str, str, int]] = field(default_factory=list)  # after the fail-over

    def errors(self, kind: str) -> set[int]:
        return {code for k, _, code in self.answers if k == kind}


def settled(seed: int) -> FailoverSimulation:
    """A fault-free simulation whose two groups are Stable (random delays stay on)."""
    sim = FailoverSimulation(seed, churn=False)
    sim.quiet()
    sim.calm = False
    return sim


def run_scenario(step: str, group: str, how: str, seed: int) -> ScenarioRun:
    """A new consumer joins ``group``'s Stable generation; the coordinator fails ``how`` at
    ``step`` of the rebalance; the run goes on to quiet and checks every invariant."""
    sim = settled(seed)
    p = partition_for(group, SHARDS)
    owner = sim.owner_runtime(p)
    assert owner is not None
    live = sim.group_at(owner, group)
    assert live is not None
    run = ScenarioRun(sim, group, live.generation)
    old_members = set(live.members)

    def fire() -> None:
        if run.fired_at is None:
            run.fired_at = sim.now
            sim.fail_over(p, how, load_ms=LOAD_MS)

    def on_event(_: FailoverSimulation, what: str, payload: Any) -> None:
        if what == "loaded" and run.fired_at is not None:
            r, part = payload
            g = sim.group_at(r, group) if part == p else None
            if g is not None:
                run.loaded.append(g.generation)
        if what == "answer" and run.fired_at is not None:
            _, token, response = payload
            sent = sim.sent[token]
            if sim.client(sent.client).group == group:
                run.answers.append((sent.kind, sent.client, error_of(response)))
        if run.fired_at is not None:
            return
        r = sim.runtimes[sim.logs[p].owner or 0]
        g = sim.group_at(r, group)
        if g is None:
            return
        if what == "answer":
            _, token, response = payload
            sent = sim.sent[token]
            if sent.kind == "heartbeat" and isinstance(sent.event, Heartbeat) \
                    and sent.event.group_id == group and error_of(response) == REBALANCING:
                run.told += 1
                if step == "some_heartbeats" and len(old_members) > run.told:
                    fire()
        elif what == "handled" and g.state is GroupState.PREPARING_REBALANCE:
            joined = {m for m, x in g.members.items() if x.awaiting_join}
            some_joined = bool(joined & old_members) and not old_members <= joined
            if (step == "notified" and run.told == 0) or (step == "some_joins" and some_joined):
                fire()

    def on_result(r: Runtime, result: Result) -> tuple[int, Callable[[], None]] | None:
        if run.fired_at is not None or r.held.get(p) is None:
            return None
        joins = [x for x in result.replies if isinstance(x.response, JoinGroupResponse)
                 and x.response.error_code == NONE]
        wrote = [rec.value for rec in result.records if rec.key == GroupMetadataKey(group)
                 and isinstance(rec.value, GroupMetadataValue) and rec.value.members
                 and rec.value.generation > run.base_generation]
        # a graceful hand-off waits for the result in progress; a crash or a pause cuts it
        everything = len(result.replies) if how == "handoff" else None
        if step == "generation_chosen" and joins:
            return everything or 0, fire
        if step == "generation_written" and wrote:
            run.written = wrote[0].generation
            return everything or 0, fire
        if step == "some_join_responses" and len(joins) >= 2:
            return everything or 1, fire
        return None

    sim.on_event, sim.on_result = on_event, on_result
    newcomer = sim._new_client(f"{group}9", group, GROUPS[group])
    sim.clients.append(newcomer)
    sim.start(newcomer)
    sim.note(f"scenario {step}/{how}: {newcomer.name} joins {group}")
    try:
        for _ in range(400):
            sim.step()
            sim.check()
            if run.fired_at is not None and sim.now > run.fired_at + 20_000:
                break
        if run.fired_at is None:
            raise AssertionError(f"the scenario never reached step {step}")
        sim.on_result = None
        sim.quiet()
        sim.on_event = None
        sim.drain()
    except Exception as exc:
        tail = "\n".join(sim.log[-25:])
        raise AssertionError(f"scenario {step}/{group}/{how} seed {seed}: {exc}\n{tail}") \
            from exc
    return run
