"""Backpressure of the PostgreSQL log: acks=1 answers wait for the commit once a
partition's uncommitted backlog passes ``BACKLOG_BYTES`` (else it grows without bound and
acks=all requests queue behind it)."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from samsa.storage.pg import log as pg_log
from samsa.storage.pg.engine import PgEngine
from tests.cluster.test_pg_log import claim, run
from tests.records import make_batch


def test_acks1_waits_for_the_commit_past_the_backlog_bound(
        pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_log, "BACKLOG_BYTES", 3000)

    async def scenario(e1: PgEngine, _e2: PgEngine, pid: int) -> None:
        plog = await claim(e1, pid)
        blocker = await asyncpg.connect(pg_dsn)
        tx = blocker.transaction()
        await tx.start()
        # The writer's statement updates this row: it waits until the lock goes.
        await blocker.execute("SELECT 1 FROM samsa_partitions WHERE pid = $1 FOR UPDATE", pid)
        try:
            now = int(time.time() * 1000)
            small = plog.append(make_batch([(None, b"x" * 1000)]), now)
            await asyncio.wait_for(plog.wait_room(small.last_offset + 1), 30)
            assert plog.log_end_offset == 0  # answered under the bound, not committed
            big = plog.append(make_batch([(None, b"y" * 4000)]), now)
            waiting = asyncio.ensure_future(plog.wait_room(big.last_offset + 1))
            await asyncio.sleep(0.3)
            assert not waiting.done()
        finally:
            await tx.rollback()
            await blocker.close()
        await asyncio.wait_for(waiting, 30)
        assert plog.log_end_offset == big.last_offset + 1

    run(pg_dsn, scenario)
