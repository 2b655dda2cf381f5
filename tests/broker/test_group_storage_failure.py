"""The group edge when a ``__consumer_offsets`` append fails: the shard is reloaded from its
log and every request the lost result answered gets COORDINATOR_NOT_AVAILABLE; none hangs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.coordinator import GroupState, JoinGroup, SyncGroup, partition_for
from samsa.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from samsa.storage.local import LocalEngine
from tests.coordinator.harness import PROTOCOLS

NOT_AVAILABLE, MEMBER_ID_REQUIRED = 15, 79


def _join(member_id: str, client: str) -> JoinGroup:
    return JoinGroup(group_id="g", member_id=member_id, protocol_type="consumer",
                     protocols=PROTOCOLS, session_timeout_ms=10_000,
                     rebalance_timeout_ms=10_000, group_instance_id=None, client_id=client,
                     client_host="/127.0.0.1", require_known_member_id=True,
                     supports_skip_assignment=True)


def test_failed_append_answers_every_request_of_the_lost_result(tmp_path: Path) -> None:
    async def main() -> tuple[Any, Any, GroupState]:
        config = BrokerConfig(port=0, data_dir=tmp_path / "data", values={
            "group.initial.rebalance.delay.ms": 0})
        broker = Broker(config, LocalEngine(config))
        await broker.start()
        runtime = broker.groups
        try:
            ids = []
            for client in ("a", "b"):
                first = await runtime.call(_join("", client))
                assert isinstance(first, JoinGroupResponse)
                assert first.error_code == MEMBER_ID_REQUIRED
                ids.append(first.member_id)
            joins = [asyncio.create_task(runtime.call(_join(m, "x"))) for m in ids]
            answers = await asyncio.wait_for(asyncio.gather(*joins), 10)
            leader = answers[0].leader
            follower = next(m for m in ids if m != leader)
            generation = answers[0].generation_id
            parked = asyncio.create_task(runtime.call(SyncGroup("g", generation, follower, ())))
            await asyncio.sleep(0.05)
            assert not parked.done()

            assert runtime.topic is not None
            log = runtime.topic.partitions[partition_for("g", 50)].log
            real_append = log.append

            def broken(*args: Any, **kwargs: Any) -> Any:
                raise OSError(28, "No space left on device")

            log.append = broken  # type: ignore[method-assign]
            try:
                lead = await asyncio.wait_for(runtime.call(SyncGroup(
                    "g", generation, leader, ((leader, b"L"), (follower, b"F")))), 5)
                follow = await asyncio.wait_for(parked, 5)  # hung forever before
            finally:
                log.append = real_append  # type: ignore[method-assign]
            coord = runtime.coordinator
            assert coord is not None
            shard = coord.shard_for("g")
            assert shard is not None
            state = shard.groups["g"].state if "g" in shard.groups else GroupState.DEAD
            return lead, follow, state
        finally:
            await broker.stop()

    lead, follow, state = asyncio.run(main())
    assert isinstance(lead, SyncGroupResponse) and lead.error_code == NOT_AVAILABLE
    assert isinstance(follow, SyncGroupResponse) and follow.error_code == NOT_AVAILABLE
    assert state is GroupState.DEAD  # reloaded from the log, where the group never was
