"""The group edge's background jobs (KIP-1263 offload): a target assignment computed in a
worker process comes back to its group; with offload disabled the join is answered from the
target it asked for (Kafka 4.3's inline assignment); worker processes end with their broker,
even a SIGKILLed one; work that cannot be pickled runs in a thread."""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import time
from pathlib import Path
from typing import Any

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from samsa.broker.config import BrokerConfig
from samsa.broker.group_jobs import JobRunner
from samsa.broker.server import Broker
from samsa.coordinator import ConsumerGroupHeartbeat
from samsa.coordinator.jobs import Job, JobKind
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse
from samsa.storage.local import LocalEngine
from tests.brokerproc import BrokerProcess
from tests.wire import WireClient


def _join(member: str, topic: str) -> ConsumerGroupHeartbeat:
    return ConsumerGroupHeartbeat("g", member, 0, rebalance_timeout_ms=30_000,
                                  subscribed_topic_names=(topic,), topic_partitions=())


async def _heartbeat(broker: Broker, member: str, epoch: int) -> ConsumerGroupHeartbeatResponse:
    r = await broker.groups.call(ConsumerGroupHeartbeat("g", member, epoch, topic_partitions=()))
    assert isinstance(r, ConsumerGroupHeartbeatResponse) and r.error_code == 0, r
    return r


def _run_broker(tmp_path: Path, values: dict[str, Any], scenario: Any) -> Any:
    async def main() -> Any:
        config = BrokerConfig(port=0, data_dir=tmp_path / "data", values=values)
        broker = Broker(config, LocalEngine(config))
        await broker.start()
        try:
            broker.topics.create("t", 3, now_ms=0)
            return await scenario(broker)
        finally:
            await broker.stop()

    return asyncio.run(main())


def test_an_offloaded_target_comes_back_from_a_worker_process(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[int, int, int]:
        joined = await broker.groups.call(_join("a", "t"))
        assert isinstance(joined, ConsumerGroupHeartbeatResponse)
        assert joined.error_code == 0 and joined.assignment == ()  # epoch 1: nothing yet
        coord = broker.groups.coordinator
        assert coord is not None
        deadline = time.monotonic() + 30
        while True:  # the worker process has the assignor; its outcome comes back
            group = coord.shard_for("g").hard.consumer.groups["g"]  # type: ignore[union-attr]
            if group.assignment_epoch == group.epoch or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        after = await _heartbeat(broker, "a", joined.member_epoch)
        assert after.assignment is not None
        workers = broker.groups.jobs._processes  # the pool that ran it
        assert workers is not None
        return joined.member_epoch, after.member_epoch, sum(len(tp.partitions)
                                                            for tp in after.assignment)

    assert _run_broker(tmp_path, {}, scenario) == (1, 2, 3)


def test_without_offload_the_join_is_answered_from_its_target(tmp_path: Path) -> None:
    async def scenario(broker: Broker) -> tuple[int, int]:
        joined = await broker.groups.call(_join("a", "t"))
        assert isinstance(joined, ConsumerGroupHeartbeatResponse) and joined.assignment
        assert broker.groups.jobs._processes is None  # nothing offloaded
        return joined.member_epoch, sum(len(tp.partitions) for tp in joined.assignment)

    values = {"group.consumer.assignor.offload.enable": False}
    assert _run_broker(tmp_path, values, scenario) == (2, 3)


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out |= {int(c) for c in f.read().split()}
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_worker_processes_end_with_a_killed_broker(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"group.consumer.assignment.interval.ms": "0"})
    broker.start()
    try:
        client = WireClient(broker.bootstrap)
        # a join: a target job (for a topic that does not exist yet: an empty one)
        client.call(68, 1, ConsumerGroupHeartbeatRequest(
            group_id=GroupId("g"), member_id="m", member_epoch=i32(0), instance_id=None,
            rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=(TopicName("t"),), subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=()))
        assert broker.proc is not None
        pid = broker.proc.pid
        deadline = time.monotonic() + 30
        while not _children(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _children(pid)
        assert workers, "no worker process started"
        client.close()
        os.kill(pid, signal.SIGKILL)
        broker.proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [w for w in workers if _alive(w)]
        for w in survivors:  # (they would keep the broker's stdout open: stop() would hang)
            os.kill(w, signal.SIGKILL)
        assert not survivors, "a worker outlived its broker"
    finally:
        broker.stop()


def test_work_that_cannot_be_pickled_runs_in_a_thread() -> None:
    async def main() -> object:
        done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        runner = JobRunner(1, lambda job, outcome: done.set_result(outcome))
        try:
            runner.start(Job(0, JobKind.REGEX_RESOLUTION, "g", lambda: "ran"))  # a lambda
            return await asyncio.wait_for(done, 60)
        finally:
            runner.close()

    assert asyncio.run(main()) == "ran"
