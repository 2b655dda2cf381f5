"""Share-partition state writes are group-committed (broker/shares.py): the changes of one
event-loop pass become one ShareSnapshot per share partition, in one append per state
partition; each acknowledgement is answered once that append is on disk; a restarted
broker reads the latest state back. In process, on the local engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.broker.clock import now_ms
from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.broker.topics import SHARE_STATE_TOPIC
from samsa.protocol.records import decode_batches
from samsa.share import AckType, DurableState
from samsa.storage.local import LocalEngine


def _config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(port=0, data_dir=tmp_path / "data", values={
        "share.coordinator.state.topic.num.partitions": 1})


def test_one_append_per_loop_pass_answered_once_durable(tmp_path: Path) -> None:
    async def main() -> dict[tuple[str, int], DurableState]:
        broker = Broker(_config(tmp_path), LocalEngine(_config(tmp_path)))
        await broker.start()
        try:
            topic = broker.topics.create("t", 2, now_ms=now_ms())
            shares = broker.shares
            parts = [shares.partition("g", topic.topic_id, p) for p in topic.partitions]
            state = broker.topics.get(SHARE_STATE_TOPIC)
            assert state is not None
            log = state.partitions[0].log
            before = log.log_end_offset  # the two partitions' start offsets, written at once
            marks = []
            for i, part in enumerate(parts):
                part.acquire("m", 10, 10, now_ms())
                for offset in range(3 + i):  # several changes of each in this pass
                    code, update = part.acknowledge("m", [(offset, offset, [AckType.ACCEPT])],
                                                    now_ms())
                    assert code == 0
                    marks.append(shares.changed(part, update))
            assert len({id(m) for m in marks}) == 1  # one coalesced write
            assert log.log_end_offset == before  # written at the loop's next step
            await shares.durable(marks)
            assert log.log_end_offset == before + 2 and log.flushed_offset >= before + 2
            written = [b for data in await log.read_all() for b in decode_batches(bytes(data))
                       if b.records and b.records[0][0] >= before]
            assert len(written) == 1 and len(written[0].records) == 2
            out = {}
            for p in topic.partitions:
                got = shares.state("g", topic.topic_id, p.index)
                assert got is not None
                out[("g", p.index)] = got
            return out
        finally:
            await broker.stop()

    live = asyncio.run(main())
    # accepted from the start; the rest is acquired, so written as never delivered
    assert live[("g", 0)] == DurableState(3) and live[("g", 1)] == DurableState(4)

    async def reread() -> None:
        broker = Broker(_config(tmp_path), LocalEngine(_config(tmp_path)))
        await broker.start()
        try:
            t = broker.topics.get("t")
            assert t is not None
            for p in (0, 1):
                assert broker.shares.state("g", t.topic_id, p) == live[("g", p)]
        finally:
            await broker.stop()

    asyncio.run(reread())
