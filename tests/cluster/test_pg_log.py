"""The PostgreSQL partition log against a real database: fencing by lease epoch, producer
state across a change of leader, reads, retention and compaction."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from samsa.log import LogConfig, OutOfOrderSequence
from samsa.protocol.records import decode_batches
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import LeaseLost, NotLeader, PgPartitionLog
from tests.records import make_batch


def run(dsn: str, scenario: Callable[[PgEngine, PgEngine, int], Awaitable[None]],
        config: LogConfig | None = None) -> None:
    async def main() -> None:
        e1, e2 = PgEngine(dsn, 1), PgEngine(dsn, 2)
        e1.open()
        e2.open()
        try:
            pid = await e1.db.run(_make_topic)
            await scenario(e1, e2, pid)
        finally:
            e1.close()
            e2.close()

    asyncio.run(main())


async def _make_topic(pool: Any) -> int:
    await pool.execute("INSERT INTO samsa_topics (name, id) VALUES ('t', gen_random_uuid())")
    return int(await pool.fetchval(
        "INSERT INTO samsa_partitions (topic, idx) VALUES ('t', 0) RETURNING pid"))


async def claim(engine: PgEngine, pid: int, config: LogConfig | None = None) -> PgPartitionLog:
    """Take the lease (as a takeover after the owner's TTL does) and lead."""
    row = await engine.db.run(lambda pool: pool.fetchrow(
        "UPDATE samsa_partitions SET owner = $2, epoch = epoch + 1 WHERE pid = $1 "
        "RETURNING epoch, log_start, log_end", pid, engine.node_id))
    plog = PgPartitionLog(engine, pid, "t", 0, config or LogConfig())
    await plog.become_leader(row["epoch"], row["log_start"], row["log_end"])
    return plog


async def stored(engine: PgEngine, pid: int) -> list[tuple[int, bytes]]:
    rows = await engine.db.run(lambda pool: pool.fetch(
        "SELECT base_offset, data FROM samsa_batches WHERE pid = $1 ORDER BY base_offset", pid))
    return [(r["base_offset"], bytes(r["data"])) for r in rows]


def values(blobs: list[bytes]) -> list[bytes | None]:
    return [v for b in blobs for batch in decode_batches(b) for _, _, _, v, _ in batch.records]


def test_stale_leader_cannot_append(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        old = await claim(e1, pid)
        info = old.append(make_batch([(None, b"a")]), int(time.time() * 1000))
        await old.wait_durable(info.last_offset + 1)
        new = await claim(e2, pid)  # node 1 was paused past its TTL; node 2 took over
        assert new.epoch == old.epoch + 1  # type: ignore[operator]
        # Node 1 wakes up still believing it leads: the append is queued, the database
        # refuses it in the write itself.
        late = old.append(make_batch([(None, b"stale")]), int(time.time() * 1000))
        with pytest.raises(LeaseLost):
            await old.wait_durable(late.last_offset + 1)
        assert not old.is_leader
        with pytest.raises(NotLeader):
            old.append(make_batch([(None, b"again")]), int(time.time() * 1000))
        info = new.append(make_batch([(None, b"b")]), int(time.time() * 1000))
        await new.wait_durable(info.last_offset + 1)
        rows = await stored(e1, pid)
        assert [o for o, _ in rows] == [0, 1]
        assert values([d for _, d in rows]) == [b"a", b"b"]

    run(pg_dsn, scenario)


def test_idempotent_sequences_survive_a_leader_change(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        now = int(time.time() * 1000)
        old = await claim(e1, pid)
        for seq in (0, 1):
            b = make_batch([(None, b"%d" % seq)], producer_id=7, producer_epoch=0,
                           base_sequence=seq)
            await old.wait_durable(old.append(b, now).last_offset + 1)
        new = await claim(e2, pid)
        retry = new.append(make_batch([(None, b"1")], producer_id=7, producer_epoch=0,
                                      base_sequence=1), now)
        assert retry.duplicate and retry.base_offset == 1
        with pytest.raises(OutOfOrderSequence):
            new.append(make_batch([(None, b"x")], producer_id=7, producer_epoch=0,
                                  base_sequence=5), now)
        nxt = new.append(make_batch([(None, b"2")], producer_id=7, producer_epoch=0,
                                    base_sequence=2), now)
        await new.wait_durable(nxt.last_offset + 1)
        assert values([d for _, d in await stored(e1, pid)]) == [b"0", b"1", b"2"]

    run(pg_dsn, scenario)


def test_reads_load_from_the_database(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        now = int(time.time() * 1000)
        old = await claim(e1, pid)
        for i in range(5):
            info = old.append(make_batch([(None, b"v%d" % i)]), now)
        await old.wait_durable(info.last_offset + 1)
        assert values([bytes(old.read(2, 1 << 20))]) == [b"v2", b"v3", b"v4"]
        new = await claim(e2, pid)
        woken = asyncio.Event()
        new.on_data = woken.set
        assert new.read(1, 1 << 20) == b""  # not in memory: a load starts
        await asyncio.wait_for(woken.wait(), 10)
        assert values([bytes(new.read(1, 1 << 20))]) == [b"v1", b"v2", b"v3", b"v4"]
        assert new.log_end_offset == 5

    run(pg_dsn, scenario)


def test_retention_and_compaction(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        now = int(time.time() * 1000)
        compacted = LogConfig.from_mapping({"cleanup.policy": "compact"})
        plog = await claim(e1, pid, compacted)
        for key, value in ((b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c"), (b"k2", b"d"),
                           (b"k3", b"e")):
            info = plog.append(make_batch([(key, value)]), now)
        await plog.wait_durable(info.last_offset + 1)
        plog.plan_compaction(int(time.time() * 1000) + 1)
        assert plog._busy is not None
        await plog._busy
        assert values([d for _, d in await stored(e1, pid)]) == [b"c", b"d", b"e"]
        done = plog._busy
        plog.plan_compaction(int(time.time() * 1000) + 1)
        assert plog._busy is done  # nothing appended since: no new pass
        plog.reconfigure(LogConfig.from_mapping({"retention.bytes": "0"}))
        plog.apply_retention(now)
        assert plog._busy is not None
        await plog._busy
        assert plog.log_start_offset == 5
        assert await stored(e1, pid) == []

    run(pg_dsn, scenario)


async def _slow_insert(engine: PgEngine, base_offset: int, fail: bool) -> None:
    """A trigger that holds the insert of the batch at ``base_offset`` for half a second,
    then lets it through or (``fail``) fails its round."""
    action = "RAISE EXCEPTION 'disk full'" if fail else "RETURN NEW"
    await engine.db.run(lambda pool: pool.execute(f"""
        CREATE FUNCTION samsa_test_slow() RETURNS trigger AS $$ BEGIN
          IF NEW.base_offset = {base_offset} THEN PERFORM pg_sleep(0.5); {action}; END IF;
          RETURN NEW;
        END $$ LANGUAGE plpgsql;
        CREATE TRIGGER samsa_test_slow BEFORE INSERT ON samsa_batches
          FOR EACH ROW EXECUTE FUNCTION samsa_test_slow();"""))


async def _two_rounds(plog: PgPartitionLog) -> tuple[int, int]:
    """Two appends committed by two rounds in flight at once; their ends."""
    first = plog.append(make_batch([(None, b"first")]), int(time.time() * 1000))
    await asyncio.sleep(0.1)  # the first round is under way (held by the trigger)
    second = plog.append(make_batch([(None, b"second")]), int(time.time() * 1000))
    return first.last_offset + 1, second.last_offset + 1


def test_a_round_commits_after_the_round_before_it(pg_dsn: str) -> None:
    """The second round's batches are copied in while the first commits slowly; its fence
    waits for the first, so it neither fails (as if the lease had moved) nor commits first."""

    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        plog = await claim(e1, pid)
        await _slow_insert(e1, 0, fail=False)
        first, second = await _two_rounds(plog)
        await asyncio.wait_for(plog.wait_durable(second), 10)
        assert plog.is_leader and plog.log_end_offset == second
        assert e1.writer.rounds == 2
        rows = await stored(e1, pid)
        assert [o for o, _ in rows] == [0, first]
        assert values([d for _, d in rows]) == [b"first", b"second"]

    run(pg_dsn, scenario)


def test_a_failed_commit_fails_the_writes_and_the_rounds_after_it(pg_dsn: str) -> None:
    """The first round fails in the database: its acks=all wait fails, and the round after
    it, already copied in, is not committed past the gap."""

    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        plog = await claim(e1, pid)
        await _slow_insert(e1, 0, fail=True)
        first, second = await _two_rounds(plog)
        for end in (first, second):
            with pytest.raises(OSError):
                await asyncio.wait_for(plog.wait_durable(end), 10)
        assert plog.log_end_offset == 0
        await asyncio.sleep(0.2)  # the second round has finished too
        assert await stored(e1, pid) == []
        end = await e1.db.run(lambda pool: pool.fetchval(
            "SELECT log_end FROM samsa_partitions WHERE pid = $1", pid))
        assert end == 0

    run(pg_dsn, scenario)


def test_a_stale_leader_finding_the_new_leaders_batches_is_fenced(pg_dsn: str) -> None:
    """The new leader already wrote the offsets the stale one copies in: the conflict sends
    the stale round back to the lease check, which drops it; nothing of it is stored."""

    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        old = await claim(e1, pid)
        new = await claim(e2, pid)
        info = new.append(make_batch([(None, b"new")]), int(time.time() * 1000))
        await new.wait_durable(info.last_offset + 1)
        late = old.append(make_batch([(None, b"stale")]), int(time.time() * 1000))
        assert late.base_offset == info.base_offset
        with pytest.raises(LeaseLost):
            await old.wait_durable(late.last_offset + 1)
        assert not old.is_leader
        assert values([d for _, d in await stored(e1, pid)]) == [b"new"]

    run(pg_dsn, scenario)
