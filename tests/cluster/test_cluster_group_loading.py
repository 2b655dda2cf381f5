"""A cluster node's coordinator shards while they load, reload and fail to load (issue 26,
item 6): a KIP-848 member is answered COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR or
COORDINATOR_NOT_AVAILABLE meanwhile, never GROUP_ID_NOT_FOUND (fatal for librdkafka >= 2.15
and the Java client), and the shard comes back while the node holds its lease.

A real node (``Broker`` with PostgreSQL storage, in this process so a test can fail an append
or hold a load), driven through its group edge (:meth:`GroupRuntime.call`) as the
ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.cluster.engine import ClusterEngine
from samsa.cluster.node import ClusterNode
from samsa.coordinator import ShardStatus, partition_for
from samsa.coordinator.events import ConsumerGroupDescribe, ConsumerGroupHeartbeat
from samsa.coordinator.responses import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)
from samsa.storage.pg.log import PgPartitionLog

E = ErrorCode
SHARDS = 3
TOPIC = "t1"
#: two groups on one shard
GROUP = "g"
NEIGHBOUR = next(f"n{i}" for i in range(1000)
                 if partition_for(f"n{i}", SHARDS) == partition_for(GROUP, SHARDS))
WHILE_MOVING = {E.none, E.coordinator_load_in_progress, E.not_coordinator,
                E.coordinator_not_available}


@contextlib.asynccontextmanager
async def node(tmp_path: Path, dsn: str, **values: Any) -> AsyncIterator[Broker]:
    config = BrokerConfig(port=0, data_dir=tmp_path / "data", values={
        "node.id": 1, "offsets.topic.num.partitions": SHARDS,
        "group.initial.rebalance.delay.ms": 0, "cluster.lease.ttl.ms": 10_000, **values})
    broker = Broker(config, ClusterEngine(config, dsn))
    await broker.start()
    try:
        if broker.topics.get(TOPIC) is None:
            broker.topics.create(TOPIC, 3, now_ms=0)
        yield broker
    finally:
        await broker.stop()


def heartbeat(member_id: str, epoch: int, group: str = GROUP,
              topics: tuple[str, ...] = (TOPIC,)) -> ConsumerGroupHeartbeat:
    joining = epoch == 0
    return ConsumerGroupHeartbeat(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None,
        rack_id=None, rebalance_timeout_ms=30_000 if joining else -1,
        subscribed_topic_names=topics if joining else None, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=() if joining else None, client_id=member_id,
        client_host="/127.0.0.1", api_version=1)


async def call(broker: Broker, member_id: str, epoch: int,
               group: str = GROUP) -> ConsumerGroupHeartbeatResponse:
    r = await asyncio.wait_for(broker.groups.call(heartbeat(member_id, epoch, group)), 20)
    assert isinstance(r, ConsumerGroupHeartbeatResponse)
    return r


async def until_answered(broker: Broker, member_id: str, epoch: int, group: str = GROUP,
                         timeout: float = 15) -> list[int]:
    """Heartbeat every 50 ms until one is answered NONE; every code seen, in order (the
    last is NONE unless the time ran out)."""
    codes: list[int] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        codes.append((await call(broker, member_id, epoch, group)).error_code)
        if codes[-1] == E.none:
            break
        await asyncio.sleep(0.05)
    return codes


async def loaded(broker: Broker) -> None:
    """Until every shard of the node is loaded."""
    for _ in range(400):
        coord = broker.groups.coordinator
        if coord is not None and len(coord.shards) == SHARDS and all(
                s.status is ShardStatus.ACTIVE for s in coord.shards.values()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the shards never loaded")


async def taken(broker: Broker, index: int) -> None:
    """Until the node has taken the lease of shard ``index`` (NOT_COORDINATOR before)."""
    for _ in range(400):
        coord = broker.groups.coordinator
        if coord is not None and index in coord.shards:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"shard {index} was never taken")


def offsets_log(broker: Broker, group: str = GROUP) -> PgPartitionLog:
    topic = broker.groups.topic
    assert topic is not None
    plog = topic.partitions[partition_for(group, SHARDS)].log
    assert isinstance(plog, PgPartitionLog)
    return plog


def fail_next_append(plog: PgPartitionLog) -> None:
    real = plog.append

    def broken(*args: Any, **kwargs: Any) -> Any:
        plog.append = real  # type: ignore[method-assign]
        raise OSError(28, "No space left on device")

    plog.append = broken  # type: ignore[method-assign]


def reads_held_until(gate: asyncio.Event) -> Callable[[PgPartitionLog], Awaitable[list[bytes]]]:
    """A ``PgPartitionLog.read_all`` that holds the read of ``GROUP``'s shard until ``gate``
    is set (patch it in to hold that shard's load)."""
    read_all = PgPartitionLog.read_all

    async def held(self: PgPartitionLog) -> list[bytes]:
        if self.topic == "__consumer_offsets" and self.index == partition_for(GROUP, SHARDS):
            await gate.wait()
        return await read_all(self)

    return held


def run(tmp_path: Path, dsn: str, body: Callable[[Broker], Awaitable[None]]) -> None:
    async def main() -> None:
        async with node(tmp_path, dsn) as broker:
            await loaded(broker)
            await body(broker)

    asyncio.run(main())


def test_reload_after_a_failed_append_serves_the_group_again(tmp_path: Path,
                                                             pg_dsn: str) -> None:
    """An append of the group's shard fails: the request is answered
    COORDINATOR_NOT_AVAILABLE, the node (still holding the lease) loads the shard again from
    the database and the member goes on. Before, a cluster node dropped the shard and never
    loaded it again: NOT_COORDINATOR for ever, while FindCoordinator named that node."""

    async def body(broker: Broker) -> None:
        a = await call(broker, "a", 0)
        assert a.error_code == E.none
        fail_next_append(offsets_log(broker))
        b = await call(broker, "b", 0)
        assert b.error_code == E.coordinator_not_available
        codes = await until_answered(broker, "a", a.member_epoch)
        assert set(codes) <= WHILE_MOVING, codes
        assert codes[-1] == E.none, codes

    run(tmp_path, pg_dsn, body)


def test_reload_replays_appends_committed_after_the_failure(tmp_path: Path,
                                                            pg_dsn: str) -> None:
    """A join's records are appended but not yet committed when the next append of the
    shard fails. The reload must wait for them: the join is acknowledged once they commit,
    so a shard replayed without them would not know the group the member was told it
    joined (GROUP_ID_NOT_FOUND on its next heartbeat)."""

    async def body(broker: Broker) -> None:
        plog = offsets_log(broker)
        held = asyncio.Event()
        take = plog.take_pending

        def gated() -> Any:
            return take() if held.is_set() else None

        plog.take_pending = gated  # type: ignore[method-assign]
        join = asyncio.create_task(call(broker, "c", 0, NEIGHBOUR))
        await asyncio.sleep(0.2)
        assert not join.done()  # appended, waiting for its commit
        fail_next_append(plog)
        assert (await call(broker, "d", 0)).error_code == E.coordinator_not_available
        await asyncio.sleep(0.5)  # a reload that does not wait replays the log now
        held.set()
        plog.engine.kick(plog)
        joined = await asyncio.wait_for(join, 20)
        assert joined.error_code == E.none
        codes = await until_answered(broker, "c", joined.member_epoch, NEIGHBOUR)
        assert set(codes) <= WHILE_MOVING, codes
        assert codes[-1] == E.none, codes

    run(tmp_path, pg_dsn, body)


def test_a_failed_shard_load_is_retried(tmp_path: Path, pg_dsn: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the shard's records fails once when the node takes its lease: the node loads
    it again while it holds the lease (before, the shard stayed unloaded for good)."""
    read_all = PgPartitionLog.read_all
    failed: list[int] = []

    async def flaky(self: PgPartitionLog) -> list[bytes]:
        if self.topic == "__consumer_offsets" and \
                self.index == partition_for(GROUP, SHARDS) and not failed:
            failed.append(self.index)
            raise ConnectionError("the database went away")
        return await read_all(self)

    monkeypatch.setattr(PgPartitionLog, "read_all", flaky)

    async def main() -> None:
        async with node(tmp_path, pg_dsn) as broker:
            codes = await until_answered(broker, "a", 0)
            assert failed
            assert set(codes) <= WHILE_MOVING, codes
            assert codes[-1] == E.none, codes

    asyncio.run(main())


def test_a_loading_shard_never_answers_group_id_not_found(tmp_path: Path, pg_dsn: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The node restarts and takes the shard back while a member of a group on it goes on
    heartbeating with its epoch: until the shard's records are replayed the heartbeat and
    ConsumerGroupDescribe are answered COORDINATOR_LOAD_IN_PROGRESS, then as before."""
    gate = asyncio.Event()
    held = reads_held_until(gate)

    async def main() -> None:
        async with node(tmp_path, pg_dsn) as broker:
            await loaded(broker)
            a = await call(broker, "a", 0)
            assert a.error_code == E.none
        monkeypatch.setattr(PgPartitionLog, "read_all", held)
        gate.clear()
        async with node(tmp_path, pg_dsn) as broker:
            try:
                await taken(broker, partition_for(GROUP, SHARDS))
                for _ in range(3):
                    r = await call(broker, "a", a.member_epoch)
                    assert r.error_code == E.coordinator_load_in_progress, r
                    described = await broker.groups.call(ConsumerGroupDescribe((GROUP,)))
                    assert isinstance(described, ConsumerGroupDescribeResponse)
                    assert described.groups[0].error_code == E.coordinator_load_in_progress
                    await asyncio.sleep(0.1)
            finally:
                gate.set()
            codes = await until_answered(broker, "a", a.member_epoch)
            assert codes[-1] == E.none and E.group_id_not_found not in codes, codes

    asyncio.run(main())


def test_a_node_that_lost_the_lease_never_says_a_group_is_gone(
        tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shard's lease moved behind the node's back (another node took it over while this
    one was paused; it has not ticked since) and a member of a group created on the new
    owner heartbeats here: this node has never seen the group, but before it answers
    GROUP_ID_NOT_FOUND (fatal for the member) it asks the database, finds its lease gone,
    gives the shard up and answers NOT_COORDINATOR. While it does hold the lease, a group
    it does not know is gone: GROUP_ID_NOT_FOUND, as Kafka."""

    async def body(broker: Broker) -> None:
        assert (await call(broker, "z", 5)).error_code == E.group_id_not_found

        async def no_tick(self: ClusterNode) -> None:
            return None

        monkeypatch.setattr(ClusterNode, "tick", no_tick)  # the node notices nothing alone
        pid = offsets_log(broker).pid
        await offsets_log(broker).engine.db.run(lambda pool: pool.execute(
            "UPDATE samsa_partitions SET epoch = epoch + 1, owner = NULL WHERE pid = $1", pid))
        assert (await call(broker, "z", 5)).error_code == E.not_coordinator
        coord = broker.groups.coordinator
        assert coord is not None and coord.shard_for(GROUP) is None

    run(tmp_path, pg_dsn, body)


def test_a_group_taken_over_is_assigned_from_the_topics_the_node_has_now(
        tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group waits for its next target (a member joined within the assignment interval)
    when its shard moves to a node. That node learned of a subscribed topic after it started
    (another node created it) and no member has called it yet: the target computed as the
    shard loads must include the topic. Before, the coordinator still had the topics of the
    node's start, gave every member an empty target, and, the group's metadata hash being
    unchanged, never computed another (the CI failure of test_cluster_failover)."""
    later = "t2"
    gate = asyncio.Event()
    held = reads_held_until(gate)

    async def join(broker: Broker, member_id: str) -> None:
        r = await asyncio.wait_for(
            broker.groups.call(heartbeat(member_id, 0, topics=(TOPIC, later))), 20)
        assert isinstance(r, ConsumerGroupHeartbeatResponse) and r.error_code == E.none, r

    async def main() -> None:
        slow = {"group.consumer.assignment.interval.ms": 60_000,
                "group.consumer.max.assignment.interval.ms": 60_000}
        async with node(tmp_path, pg_dsn, **slow) as broker:
            await loaded(broker)
            await join(broker, "a")  # the first target is computed at once
            await join(broker, "b")  # the next one waits for the interval
        monkeypatch.setattr(PgPartitionLog, "read_all", held)
        async with node(tmp_path, pg_dsn, **{"group.consumer.assignment.interval.ms": 0}
                        ) as broker:
            try:
                await taken(broker, partition_for(GROUP, SHARDS))
                assert broker.topics.get(later) is None
                broker.topics.create(later, 2, now_ms=0)
            finally:
                gate.set()
            await loaded(broker)
            for _ in range(200):  # the target is a job: until it has landed
                described = await broker.groups.call(ConsumerGroupDescribe((GROUP,)))
                assert isinstance(described, ConsumerGroupDescribeResponse)
                group = described.groups[0]
                assert group.error_code == E.none, group
                if group.assignment_epoch == group.group_epoch:
                    break
                await asyncio.sleep(0.05)
            names = {t.topic_name for m in group.members for t in m.target_assignment}
            assert names == {TOPIC, later}, group

    asyncio.run(main())
