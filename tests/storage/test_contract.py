"""The storage contract (:class:`samsa.broker.storage.PartitionStore` and
:class:`~samsa.broker.storage.TopicStore`), run against every
engine: local segment files, PostgreSQL and the in-memory engine of :mod:`tests.storage.memory`
(see :mod:`tests.storage.kits`). An object-storage engine would join ``KITS`` and pass the
same tests: appends, reads, durability waits, the idempotent producer, fencing, loading
after a restart or a takeover, compaction and timestamps; topic changes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest
from kio.schema.errors import ErrorCode

from samsa.broker.storage import PartitionStore, TopicRecord
from samsa.log import (
    LogConfig,
    LogError,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
)
from samsa.protocol.batch import parse_header
from samsa.protocol.records import decode_batches
from tests.records import make_batch
from tests.storage.kits import Kit, now_ms


def run(kit: Kit, scenario: Callable[[Kit], Awaitable[None]]) -> None:
    asyncio.run(scenario(kit))


def values(data: bytes | memoryview | list[bytes]) -> list[bytes | None]:
    blobs = data if isinstance(data, list) else [bytes(data)]
    return [v for b in blobs for batch in decode_batches(bytes(b)) for _, _, _, v, _ in
            batch.records]


async def append(store: PartitionStore, *batches: bytes) -> int:
    """Append and wait until durable; the log end after."""
    end = 0
    for b in batches:
        end = store.append(b, now_ms()).last_offset + 1
    await store.wait_durable(end)
    return end


def test_appends_get_offsets_and_reads_return_whole_batches(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead()
        infos = [store.append(make_batch(recs), now_ms()) for recs in (
            [(None, b"a")], [(None, b"b"), (None, b"c")], [(None, b"d")])]
        assert [(i.base_offset, i.last_offset) for i in infos] == [(0, 0), (1, 2), (3, 3)]
        assert all(not i.duplicate and i.log_append_time == -1 for i in infos)
        await store.wait_durable(4)
        assert store.flushed_offset >= 4 and store.log_end_offset == 4
        assert store.log_start_offset == 0
        assert values(store.read(0, 1 << 20)) == [b"a", b"b", b"c", b"d"]
        assert values(store.read(2, 1))[:2] == [b"b", b"c"]  # the whole batch holding 2
        assert store.read(4, 1 << 20) == b""
        with pytest.raises(OffsetOutOfRange):
            store.read(5, 1 << 20)

    run(kit, scenario)


def test_a_retried_idempotent_batch_answers_its_first_offsets(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead()
        batches = [make_batch([(None, b"%d" % s)], producer_id=7, producer_epoch=0,
                              base_sequence=s) for s in range(2)]
        await append(store, *batches)
        retry = store.append(batches[1], now_ms())
        assert retry.duplicate and (retry.base_offset, retry.last_offset) == (1, 1)
        with pytest.raises(OutOfOrderSequence):
            store.append(make_batch([(None, b"x")], producer_id=7, producer_epoch=0,
                                    base_sequence=5), now_ms())
        assert await append(store, make_batch([(None, b"2")], producer_id=7,
                                              producer_epoch=0, base_sequence=2)) == 3
        assert values(await store.read_all()) == [b"0", b"1", b"2"]

    run(kit, scenario)


def test_refused_batches_write_nothing(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead(LogConfig.from_mapping({"max.message.bytes": "100"}))
        with pytest.raises(MessageTooLarge):
            store.append(make_batch([(None, b"x" * 200)]), now_ms())
        assert await append(store, make_batch([(None, b"ok")])) == 1
        assert values(await store.read_all()) == [b"ok"]

    run(kit, scenario)


def test_log_append_time_stamps_the_batch(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead(LogConfig.from_mapping(
            {"message.timestamp.type": "LogAppendTime"}))
        now = now_ms()
        info = store.append(make_batch([(None, b"a")], timestamp_ms=1000), now)
        assert info.log_append_time == now
        await store.wait_durable(1)
        header = parse_header(bytes(store.read(0, 1 << 20)))
        assert header.timestamp_type == 1 and header.max_timestamp == now

    run(kit, scenario)


def test_read_all_waits_for_the_appends_accepted_before(kit: Kit) -> None:
    """Loading a coordinator shard right after appends (a reload after a failure): every
    accepted append is in what it reads."""

    async def scenario(kit: Kit) -> None:
        store = await kit.lead()
        for v in (b"a", b"b", b"c"):
            store.append(make_batch([(b"k", v)]), now_ms())
        assert values(await store.read_all()) == [b"a", b"b", b"c"]

    run(kit, scenario)


def test_a_restart_loads_what_was_written(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead()
        first = make_batch([(None, b"a")], producer_id=3, producer_epoch=0, base_sequence=0)
        await append(store, first, make_batch([(None, b"b")]))
        again = await kit.reopen(store)
        assert again.log_end_offset == 2 and again.epoch is not None
        assert values(await again.read_all()) == [b"a", b"b"]
        assert again.append(first, now_ms()).duplicate  # producer state came back too
        assert await append(again, make_batch([(None, b"c")])) == 3

    run(kit, scenario)


def test_a_stale_leader_is_fenced(kit: Kit) -> None:
    """Node 1 was paused past its lease; node 2 took the partition over. Node 1's next
    write is refused by the store itself (NOT_LEADER_OR_FOLLOWER) and it stops leading;
    node 2 goes on from what was durable."""
    if not kit.leases:
        pytest.skip("a single node has no leases to lose")

    async def scenario(kit: Kit) -> None:
        old = await kit.lead()
        await append(old, make_batch([(None, b"a")]))
        new = await kit.take_over(old)
        assert new.epoch is not None and old.epoch is not None and new.epoch > old.epoch
        late = old.append(make_batch([(None, b"stale")]), now_ms())
        with pytest.raises(OSError) as lost:
            await old.wait_durable(late.last_offset + 1)
        assert getattr(lost.value, "error_code", None) == ErrorCode.not_leader_or_follower
        assert old.epoch is None
        with pytest.raises(LogError) as refused:
            old.append(make_batch([(None, b"again")]), now_ms())
        assert refused.value.error_code == ErrorCode.not_leader_or_follower
        assert await append(new, make_batch([(None, b"b")])) == 2
        assert values(await new.read_all()) == [b"a", b"b"]

    run(kit, scenario)


def test_compaction_keeps_the_latest_record_of_each_key(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead(LogConfig.from_mapping(
            {"cleanup.policy": "compact", "segment.bytes": "100"}))
        for key, value in ((b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c"), (b"k2", b"d"),
                           (b"k3", b"e")):
            await append(store, make_batch([(key, value)]))
        await kit.compact(store, now_ms() + 1)
        assert values(await store.read_all()) == [b"c", b"d", b"e"]
        assert store.log_end_offset == 5

    run(kit, scenario)


def test_offsets_by_timestamp(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = await kit.lead()
        assert await store.find_timestamp(None) is None
        await append(store, *(make_batch([(None, b"%d" % t)], timestamp_ms=t)
                              for t in (1000, 3000, 2000)))
        assert await store.find_timestamp(1500) == (1, 3000)
        assert store.offset_for_timestamp(1500) == (1, 3000)  # blocking, for share starts
        assert await store.find_timestamp(3001) is None
        assert await store.find_timestamp(None) == (1, 3000)

    run(kit, scenario)


def test_topic_changes_are_awaited_and_seen_in_the_next_snapshot(kit: Kit) -> None:
    async def scenario(kit: Kit) -> None:
        store = kit.topics()
        await store.fetch()
        made = TopicRecord("made", uuid.uuid4(), {"retention.ms": "1000"}, 2)

        async def now() -> dict[str, TopicRecord]:
            return {r.name: r for r in await store.fetch() or []}

        assert await store.create(made)
        assert (await now())["made"] == made
        assert not await store.create(TopicRecord("made", uuid.uuid4(), {}, 1))  # taken
        assert not store.create_now(TopicRecord("made", uuid.uuid4(), {}, 1))
        assert store.create_now(TopicRecord("other", uuid.uuid4(), {}, 1))
        await store.add_partitions("made", 2, 5)
        await store.alter("made", {"cleanup.policy": "compact"})
        assert (await now())["made"] == TopicRecord("made", made.topic_id,
                                                    {"cleanup.policy": "compact"}, 5)
        assert not await store.delete("made", uuid.uuid4())  # not the topic of that id
        assert await store.delete("made", made.topic_id)
        assert set(await now()) == {"other"}
        assert not await store.delete("made", made.topic_id)  # deleted already
        assert await store.fetch() is None  # nothing changed since

    run(kit, scenario)
