"""Storage faults under a real node: a :class:`~samsa.broker.server.Broker` over the
in-memory engine (:mod:`tests.storage.memory`, a cluster of one with leases, so its
coordinator shards arrive through ``on_shard_gained`` as on a cluster node), driven through
its group edge as the ConsumerGroupHeartbeat handler drives it, while the engine fails an
append, loses a lease or holds its commits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.broker.topics import OFFSETS_TOPIC
from samsa.coordinator import partition_for
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse
from tests.cluster.test_cluster_group_loading import heartbeat
from tests.storage.memory import MemoryDatabase, MemoryEngine

E = ErrorCode
SHARDS = 3
GROUP = "g"
SHARD = partition_for(GROUP, SHARDS)


@contextlib.asynccontextmanager
async def node(tmp_path: Path) -> AsyncIterator[tuple[Broker, MemoryDatabase]]:
    config = BrokerConfig(port=0, data_dir=tmp_path / "data", values={
        "offsets.topic.num.partitions": SHARDS, "group.initial.rebalance.delay.ms": 0})
    engine = MemoryEngine(config)
    broker = Broker(config, engine)
    await broker.start()
    try:
        broker.topics.create("t1", 3, now_ms=0)
        await engine.claim_all()
        yield broker, engine.db
    finally:
        await broker.stop()


async def call(broker: Broker, member_id: str, epoch: int,
               group: str = GROUP) -> ConsumerGroupHeartbeatResponse:
    r = await asyncio.wait_for(broker.groups.call(heartbeat(member_id, epoch, group)), 10)
    assert isinstance(r, ConsumerGroupHeartbeatResponse)
    return r


def run(tmp_path: Path, body: Callable[[Broker, MemoryDatabase], Awaitable[None]]) -> None:
    async def main() -> None:
        async with node(tmp_path) as (broker, db):
            await body(broker, db)

    asyncio.run(main())


def stored(db: MemoryDatabase) -> int:
    return len(db.rows[(OFFSETS_TOPIC, SHARD)].batches)


def test_a_failed_append_answers_unavailable_and_the_shard_comes_back(tmp_path: Path) -> None:
    async def body(broker: Broker, db: MemoryDatabase) -> None:
        a = await call(broker, "a", 0)
        assert a.error_code == E.none
        db.fail_appends(1)
        assert (await call(broker, "b", 0)).error_code == E.coordinator_not_available
        codes = []
        for _ in range(50):  # the node still holds the lease: the shard reloads
            codes.append((await call(broker, "a", a.member_epoch)).error_code)
            if codes[-1] == E.none:
                break
            await asyncio.sleep(0.02)
        assert set(codes) <= {E.coordinator_load_in_progress, E.none}, codes
        assert codes[-1] == E.none
        assert (await call(broker, "b", 0)).error_code == E.none

    run(tmp_path, body)


def test_a_lost_lease_fences_the_group_writes(tmp_path: Path) -> None:
    """The lease moves while the node does not know (paused): its next group write is
    refused by the store, the request is answered COORDINATOR_NOT_AVAILABLE, the shard is
    unloaded and not loaded again (NOT_COORDINATOR), and nothing it wrote after the loss
    was stored."""

    async def body(broker: Broker, db: MemoryDatabase) -> None:
        a = await call(broker, "a", 0)
        assert a.error_code == E.none
        before = stored(db)
        db.lose_lease(OFFSETS_TOPIC, SHARD)
        assert (await call(broker, "b", 0)).error_code == E.coordinator_not_available
        assert (await call(broker, "a", a.member_epoch)).error_code == E.not_coordinator
        assert stored(db) == before
        coord = broker.groups.coordinator
        assert coord is not None and coord.shard_for(GROUP) is None

    run(tmp_path, body)


def test_a_node_told_of_a_lost_lease_unloads_the_shard(tmp_path: Path) -> None:
    async def body(broker: Broker, db: MemoryDatabase) -> None:
        a = await call(broker, "a", 0)
        db.lose_lease(OFFSETS_TOPIC, SHARD, tell=True)
        assert (await call(broker, "a", a.member_epoch)).error_code == E.not_coordinator

    run(tmp_path, body)


def test_a_stale_holder_confirms_before_saying_a_group_is_gone(tmp_path: Path) -> None:
    """A group this node never saw: while it holds the lease, GROUP_ID_NOT_FOUND (as
    Kafka); once the lease moved behind its back, it confirms, finds it gone, gives the
    shard up and answers NOT_COORDINATOR instead (fatal for the member otherwise)."""

    async def body(broker: Broker, db: MemoryDatabase) -> None:
        assert (await call(broker, "z", 5)).error_code == E.group_id_not_found
        db.lose_lease(OFFSETS_TOPIC, SHARD)
        assert (await call(broker, "z", 5)).error_code == E.not_coordinator
        coord = broker.groups.coordinator
        assert coord is not None and coord.shard_for(GROUP) is None

    run(tmp_path, body)


def test_replies_wait_for_a_slow_commit(tmp_path: Path) -> None:
    """A join's records must be durable before it is answered."""

    async def body(broker: Broker, db: MemoryDatabase) -> None:
        db.hold_commits()
        join = asyncio.create_task(call(broker, "a", 0))
        await asyncio.sleep(0.2)
        assert not join.done()
        db.release_commits()
        assert (await join).error_code == E.none
        assert stored(db) > 0

    run(tmp_path, body)
