"""A consumer-group (KIP-848) test context on the fake clock, on top of :class:`Ctx`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from samsa.coordinator import (
    ConsumerGroupHeartbeat,
    CoordinatorConfig,
    TopicInfo,
    TopicPartitions,
    TopicsSnapshot,
)
from samsa.coordinator.consumer.group import ConsumerGroup, ConsumerMember
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse

from .harness import Ctx

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
T3 = uuid.UUID(int=3)
TOPICS = TopicsSnapshot.of([TopicInfo(T1, "t1", 3), TopicInfo(T2, "t2", 2)])


def tps(assignment: dict[uuid.UUID, set[int]] | None) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted((assignment
                                                                            or {}).items()))


def as_dict(items: tuple[TopicPartitions, ...] | None) -> dict[uuid.UUID, set[int]]:
    return {tp.topic_id: set(tp.partitions) for tp in items or () if tp.partitions}


@dataclass
class CCtx(Ctx):
    """Targets are computed inline and without an interval unless a test asks otherwise:
    a heartbeat that needs a new target is answered from it (Kafka 4.3 with
    ``consumer.assignor.offload.enable=false`` and ``consumer.assignment.interval.ms=0``)."""

    config: CoordinatorConfig = field(
        default_factory=lambda: CoordinatorConfig(offsets_topic_num_partitions=1,
                                                  consumer_assignment_interval_ms=0,
                                                  consumer_assignor_offload_enable=False)
    )
    topics: TopicsSnapshot = TOPICS

    def __post_init__(self) -> None:
        super().__post_init__()
        self.coord.update_metadata(self.topics)

    def set_topics(self, *infos: TopicInfo) -> None:
        self.coord.update_metadata(TopicsSnapshot.of(infos))

    def hb(
        self,
        member_id: str,
        epoch: int,
        group_id: str = "g",
        names: tuple[str, ...] | None = None,
        regex: str | None = None,
        owned: dict[uuid.UUID, set[int]] | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_ms: int = -1,
        assignor: str | None = None,
        api_version: int = 1,
        full: bool = False,
    ) -> ConsumerGroupHeartbeatResponse:
        if epoch == 0:
            full = True
        if full:
            rebalance_ms = 30_000 if rebalance_ms == -1 else rebalance_ms
            if names is None and regex is None:
                names = ("t1",)
            owned = owned or {}
        event = ConsumerGroupHeartbeat(
            group_id=group_id,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=None if owned is None else tps(owned),
            client_id="c",
            client_host="/127.0.0.1",
            api_version=api_version,
        )
        r = self.reply(self.call(event))
        assert isinstance(r, ConsumerGroupHeartbeatResponse), r
        return r

    def cgroup(self, group_id: str = "g") -> ConsumerGroup:
        return self.shard(group_id).hard.consumer.groups[group_id]

    def member(self, member_id: str, group_id: str = "g") -> ConsumerMember:
        return self.cgroup(group_id).members[member_id]

    def owners(self, group_id: str = "g") -> dict[tuple[uuid.UUID, int], str]:
        """Who holds each partition (assigned or revoking); asserts a single owner."""
        out: dict[tuple[uuid.UUID, int], str] = {}
        for mid, m in self.cgroup(group_id).members.items():
            for a in (m.assigned, m.pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        assert (t, p) not in out, f"{t}-{p} owned by {out[(t, p)]} and {mid}"
                        out[(t, p)] = mid
        return out

    def settle(self, owned: dict[str, dict[uuid.UUID, set[int]]], rounds: int = 6,
               group_id: str = "g") -> None:
        """Members heartbeat with what they own, revoking and taking as told, until stable."""
        for _ in range(rounds):
            for mid in list(owned):
                m = self.cgroup(group_id).members.get(mid)
                if m is None:
                    continue
                r = self.hb(mid, m.member_epoch, group_id, owned=owned[mid])
                assert r.error_code == 0, r
                if r.assignment is not None:
                    owned[mid] = as_dict(r.assignment)
