"""KIP-848 consumer groups in the seeded failover simulation (issue 26, item 7).

:class:`ConsumerFailoverSimulation` runs the classic clients of
:class:`~tests.coordinator.failover_simulation.FailoverSimulation` beside the members of two
consumer-protocol groups, one on each ``__consumer_offsets`` shard (each shard holds a
classic and a consumer group), over the three runtimes whose leases move at random moments
by hand-off, crash and pause, with loads that take time and failed appends.

Members behave as Apache Kafka's Java client 4.3 (``AbstractMembershipManager``,
``ConsumerHeartbeatRequestManager``) and librdkafka >= 2.15 do:

* they find the coordinator (FindCoordinator, from a possibly stale metadata view), then
  heartbeat at the interval it gives, with their epoch and what they own; the first
  heartbeat after a join or a coordinator change carries every field;
* NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a broken connection: find the coordinator
  again, keeping epoch and partitions; COORDINATOR_LOAD_IN_PROGRESS: retry after a back-off;
* FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: partitions lost, rejoin at epoch 0 (same id);
* GROUP_ID_NOT_FOUND: fatal, the member stops for good;
* an assignment is taken at once: what is no longer assigned is revoked, what is new is
  owned, and the next heartbeat (sent at once) says so;
* now and then they commit their partitions with their member epoch (OffsetCommit v9);
* churn: crash (no leave), leave (epoch -1), stall past the session, subscription change.

Invariants after every step, beside the classic ones (the replay check of
:meth:`FailoverSimulation.check` covers consumer groups: the owner's live state is the
replay of the log):

* no partition held by two members of one group: in each runtime's live groups (assigned
  and pending revocation), and among the members the log knows, as they see themselves;
* epochs never go back: each group's epoch and each member's epoch in the log (until the
  group or the member is removed), each runtime's live group epoch per load, and the epoch
  of each member's successful answers between two joins; no member epoch above its group's;
* no member is told GROUP_ID_NOT_FOUND while its group is in the log (checked on every
  answer).

Once quiet: every consumer group is Stable on its owner, every member at the group epoch
and owning exactly the subscribed partitions, each once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    ConsumerGroupHeartbeat,
    CoordinatorConfig,
    OffsetCommit,
    Result,
    ShardStatus,
    TopicInfo,
    TopicPartitions,
    TopicsSnapshot,
    partition_for,
)
from samsa.coordinator.consumer.group import ConsumerGroup
from samsa.coordinator.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
)
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse, Response
from tests.coordinator.failover_simulation import (
    COORDINATOR_LOST,
    GROUP_NOT_FOUND,
    LOADING,
    NONE,
    SHARDS,
    TOPICS,
    UNKNOWN_MEMBER,
    Client,
    Disconnected,
    FailoverSimulation,
    InvariantViolation,
    Runtime,
    Sent,
    error_of,
    run_failover_seed,
)
from tests.coordinator.simulation import check_consumer_group

FENCED_EPOCH, STALE_EPOCH = 110, 113
TOPIC_IDS = {name: uuid.UUID(int=i + 1) for i, name in enumerate(sorted(TOPICS))}
NAMES = {v: k for k, v in TOPIC_IDS.items()}
SNAPSHOT = TopicsSnapshot.of(TopicInfo(TOPIC_IDS[t], t, n) for t, n in sorted(TOPICS.items()))
#: one consumer group on each shard
CONSUMER_GROUPS = tuple(next(g for g in (f"kip848-{i}" for i in range(100))
                             if partition_for(g, SHARDS) == p) for p in range(SHARDS))

_LOST = COORDINATOR_LOST | {LOADING}
CONSUMER_LEGAL: dict[str, set[int]] = {
    "cgh": {NONE, FENCED_EPOCH, UNKNOWN_MEMBER, GROUP_NOT_FOUND} | _LOST,
    "cleave": {NONE, FENCED_EPOCH, UNKNOWN_MEMBER, GROUP_NOT_FOUND} | _LOST,
    "ccommit": {NONE, STALE_EPOCH, UNKNOWN_MEMBER, GROUP_NOT_FOUND} | _LOST,
}


@dataclass
class Member:
    """A consumer-protocol member (see the module docstring). The fields the simulation's
    plumbing reads (``name``, ``group``, ``incarnation``, ``coordinator``, ``find``,
    ``retry_at``, ``inbox``) mean what they mean for a classic :class:`Client`."""

    name: str
    group: str
    topics: tuple[str, ...]
    status: str = "down"  # down | joining | member | fatal
    incarnation: int = 0
    coordinator: int | None = None
    coordinator_incarnation: int = 0
    member_id: str = ""
    epoch: int = 0
    seen_epoch: int = 0  # highest epoch of a successful answer since the last join
    full: bool = True  # the next heartbeat carries every field
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    find: int | None = None
    hb: int | None = None
    commit: int | None = None
    retry_at: int = 0
    next_hb_at: int = 0
    stalled_until: int = 0
    inbox: list[tuple[int, Response | Disconnected]] = field(default_factory=list)

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


class ConsumerFailoverSimulation(FailoverSimulation):
    def __init__(self, seed: int, steps: int = 250, churn: bool = True) -> None:
        self.members: list[Member] = []
        super().__init__(seed, steps, churn)
        # log bookkeeping: group -> epoch, (group, member) -> epoch
        self.log_epochs: dict[str, int] = {}
        self.log_member_epochs: dict[tuple[str, str], int] = {}
        self.live_epochs: dict[tuple[int, str], int] = {}  # (load id, group) -> epoch
        rng = self.rng
        for gid in CONSUMER_GROUPS:
            for i in range(rng.randint(2, 4)):
                self.members.append(Member(f"{gid}m{i}", gid, self._random_topics()))
        for m in self.members:  # the second group is created later, by its first member
            if m.group == CONSUMER_GROUPS[0]:
                self.start_member(m)

    # ------------------------------------------------------------------ plumbing

    def configure(self, config: CoordinatorConfig) -> CoordinatorConfig:
        return replace(config, consumer_session_timeout_ms=10_000,
                       consumer_heartbeat_interval_ms=1000)

    def booted(self, r: Runtime) -> None:
        r.coord.update_metadata(SNAPSHOT)

    def client(self, name: str) -> Any:
        for m in self.members:
            if m.name == name:
                return m
        return super().client(name)

    # ------------------------------------------------------------------ members

    def start_member(self, m: Member) -> None:
        m.incarnation += 1
        m.status, m.member_id, m.epoch, m.seen_epoch = "joining", f"{m.name}-{m.incarnation}", 0, 0
        m.owned, m.full, m.coordinator = {}, True, None
        m.find = m.hb = m.commit = None
        m.next_hb_at = m.retry_at = self.now
        m.inbox.clear()

    def stop_member(self, m: Member, status: str = "down") -> None:
        m.status = status
        m.incarnation += 1
        m.owned = {}
        m.find = m.hb = m.commit = None
        m.inbox.clear()

    def heartbeat(self, m: Member) -> None:
        joining = m.epoch == 0
        full = joining or m.full
        m.hb = self.send(m, "cgh", ConsumerGroupHeartbeat(  # type: ignore[arg-type]
            group_id=m.group, member_id=m.member_id, member_epoch=m.epoch,
            rebalance_timeout_ms=30_000 if full else -1,
            subscribed_topic_names=m.topics if full else None,
            topic_partitions=tuple(TopicPartitions(t, tuple(sorted(ps)))
                                   for t, ps in sorted(m.owned.items())),
            client_id=m.name, client_host="/sim", api_version=1))
        m.next_hb_at = self.now + self.config.consumer_heartbeat_interval_ms

    def commit_owned(self, m: Member) -> None:
        topics = tuple(CommitTopic(NAMES[t], tuple(CommitPartition(p, self.now)
                                                   for p in sorted(ps)))
                       for t, ps in sorted(m.owned.items()))
        m.commit = self.send(m, "ccommit", OffsetCommit(  # type: ignore[arg-type]
            m.group, topics, m.epoch, m.member_id, api_version=9))

    def member_coordinator_unknown(self, m: Member) -> None:
        m.coordinator = None
        m.hb = m.commit = None
        m.full = True

    def on_member_response(self, m: Member, token: int, response: object) -> None:
        if self.sent[token].kind == "find":
            self.found(m, token, response)
            return
        assert isinstance(response, Response | Disconnected)
        code = error_of(response)
        if token == m.commit:
            m.commit = None
            if code in COORDINATOR_LOST:
                self.member_coordinator_unknown(m)
            return
        if token != m.hb:
            return  # stale: its connection was closed meanwhile
        m.hb = None
        if code in COORDINATOR_LOST:
            self.member_coordinator_unknown(m)
        elif code == LOADING:
            m.full = True
            m.retry_at = self.now + self.rng.choice([100, 300])
        elif code in (FENCED_EPOCH, UNKNOWN_MEMBER):
            self.note(f"{m.name} fenced ({code}): rejoins")
            m.status, m.epoch, m.seen_epoch, m.owned, m.full = "joining", 0, 0, {}, True
            m.next_hb_at = self.now
        elif code == GROUP_NOT_FOUND:
            self.note(f"{m.name} told its group is gone: fatal")
            self.stop_member(m, "fatal")
        elif code == NONE:
            assert isinstance(response, ConsumerGroupHeartbeatResponse)
            if response.member_epoch < m.seen_epoch:
                raise InvariantViolation(f"{m.name}: epoch {response.member_epoch} after "
                                         f"{m.seen_epoch}")
            m.status, m.epoch, m.full = "member", response.member_epoch, False
            m.seen_epoch = response.member_epoch
            if response.assignment is not None:
                new = {tp.topic_id: frozenset(tp.partitions) for tp in response.assignment
                       if tp.partitions}
                if new != m.owned:
                    m.owned = new  # revoked and taken at once; acknowledged right away
                    m.next_hb_at = self.now

    def act_member(self, m: Member) -> None:
        if m.status == "fatal" or not self.turn(m, self.start_member, self.on_member_response,
                                                self._churn_member):
            return
        if m.hb is None and self.now >= max(m.next_hb_at, m.retry_at):
            self.heartbeat(m)
        if m.status == "member" and m.owned and m.commit is None and self.rng.random() < 0.1:
            self.commit_owned(m)

    def _churn_member(self, m: Member) -> bool:
        p = self.rng.random()
        if p < 0.003:
            self.note(f"{m.name} crashes")
            self.stop_member(m)
            return True
        if p < 0.006 and m.coordinator is not None and m.status == "member":
            self.note(f"{m.name} leaves")
            self.send(m, "cleave", ConsumerGroupHeartbeat(  # type: ignore[arg-type]
                group_id=m.group, member_id=m.member_id, member_epoch=-1, client_id=m.name))
            self.stop_member(m)
            return True
        if p < 0.009:
            m.stalled_until = self.now + self.rng.randint(1000, 15_000)
            self.note(f"{m.name} stalls until {m.stalled_until}")
            return True
        if p < 0.012 and m.status == "member" and m.hb is None:  # (the next one says so)
            m.topics = self._random_topics()
            m.full = True
            m.next_hb_at = self.now
        return False

    # ------------------------------------------------------------------ the driver

    def on_response(self, c: Client, token: int, response: object) -> None:
        if isinstance(c, Member):
            self.on_member_response(c, token, response)
        else:
            super().on_response(c, token, response)

    def step(self) -> None:
        self.advance(self.rng.choice([0, 100, 300, 700, 1500]))
        actors: list[Any] = [*self.clients, *self.members]
        for a in self.rng.sample(actors, len(actors)):
            if isinstance(a, Member):
                self.act_member(a)
            else:
                self.act(a)
        if self.churn and not self.calm:
            self._churn_runtimes()
        self.advance(0)

    def quiet(self, limit: int = 600) -> None:
        for m in self.members:
            m.stalled_until = 0
        super().quiet(limit)

    def drain(self) -> None:
        for m in self.members:
            self.stop_member(m, "fatal" if m.status == "fatal" else "down")
        super().drain()

    # ------------------------------------------------------------------ invariants

    def _check_answer(self, r: Runtime, sent: Sent, response: Response | Disconnected) -> None:
        if sent.kind not in CONSUMER_LEGAL:
            super()._check_answer(r, sent, response)
            return
        code = error_of(response)
        if code not in CONSUMER_LEGAL[sent.kind]:
            raise InvariantViolation(f"illegal {sent.kind} answer {response} from r{r.index}")
        group = getattr(sent.event, "group_id", "")
        if code == GROUP_NOT_FOUND and sent.kind != "cleave" and \
                group in self.logs[partition_for(group, SHARDS)].shadow.consumer.groups:
            raise InvariantViolation(f"{sent.client} told by r{r.index} that its group "
                                     f"{group} is gone ({sent.kind})")

    def _appended(self, p: int, start: int, result: Result) -> None:
        super()._appended(p, start, result)
        for rec in result.records:
            key, value = rec.key, rec.value
            if isinstance(key, ConsumerGroupMetadataKey):
                if value is None:
                    self.log_epochs.pop(key.group, None)
                    continue
                assert isinstance(value, ConsumerGroupMetadataValue)
                if value.epoch < self.log_epochs.get(key.group, 0):
                    raise InvariantViolation(f"{key.group}: group epoch went back in the log")
                self.log_epochs[key.group] = value.epoch
            elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
                mkey = (key.group, key.member_id)
                if value is None:
                    self.log_member_epochs.pop(mkey, None)
                    continue
                assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
                if value.member_epoch < self.log_member_epochs.get(mkey, 0):
                    raise InvariantViolation(f"{mkey}: member epoch went back in the log")
                self.log_member_epochs[mkey] = value.member_epoch

    def check(self) -> None:
        super().check()
        for r in self.runtimes:
            if not r.alive:
                continue
            for p, shard in r.coord.shards.items():
                if shard.status is not ShardStatus.ACTIVE:
                    continue
                for gid, group in shard.hard.consumer.groups.items():
                    self._check_live_consumer_group(r, p, gid, group)
        for gid in CONSUMER_GROUPS:
            logged = self.logs[partition_for(gid, SHARDS)].shadow.consumer.groups.get(gid)
            known = set() if logged is None else set(logged.members)
            held: dict[tuple[uuid.UUID, int], str] = {}
            for m in self.members:
                if m.group != gid or m.status != "member" or m.member_id not in known:
                    continue
                for tp in m.partitions():
                    if tp in held:
                        raise InvariantViolation(f"{gid}: {tp} owned by {held[tp]} and {m.name}")
                    held[tp] = m.name

    def _check_live_consumer_group(self, r: Runtime, p: int, gid: str,
                                   group: ConsumerGroup) -> None:
        key = (r.load_ids[p], gid)
        if group.epoch < self.live_epochs.get(key, 0):
            raise InvariantViolation(f"r{r.index}: {gid} epoch went back")
        self.live_epochs[key] = group.epoch
        check_consumer_group(group, f"r{r.index}: {gid}: ")

    def check_quiet(self) -> None:
        super().check_quiet()
        for gid in CONSUMER_GROUPS:
            owner = self.owner_runtime(partition_for(gid, SHARDS))
            shard = None if owner is None else owner.coord.shard_for(gid)
            group = None if shard is None else shard.hard.consumer.groups.get(gid)
            members = [m for m in self.members if m.group == gid]
            if any(m.status == "fatal" for m in members):
                raise InvariantViolation(f"{gid}: a member failed fatally")
            if group is None or group.state.value != "Stable":
                raise InvariantViolation(f"{gid} is not Stable on its owner after the quiet "
                                         "period")
            if {m.member_id for m in members} != set(group.members):
                raise InvariantViolation(f"{gid}: members and clients differ")
            if any(m.status != "member" or m.epoch != group.epoch for m in members):
                raise InvariantViolation(f"{gid}: a member is not at the group epoch")
            wanted = sorted((TOPIC_IDS[t], p) for t in {t for m in members for t in m.topics}
                            for p in range(TOPICS[t]))
            owned = sorted(tp for m in members for tp in m.partitions())
            if owned != wanted:
                raise InvariantViolation(f"{gid}: members own {owned}, not {wanted}")


def run_consumer_failover_seed(seed: int, steps: int = 250) -> ConsumerFailoverSimulation:
    sim = run_failover_seed(seed, steps, ConsumerFailoverSimulation)
    assert isinstance(sim, ConsumerFailoverSimulation)
    return sim
