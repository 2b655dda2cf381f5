"""Share-partition states in PostgreSQL (:mod:`samsa.storage.pg.shares`) against a real
database, two nodes' engines: a save is fenced by the partition's lease, the next owner
loads what the last one saved, a late save never overwrites a newer one, and an admin
change from another node fences the owner's older saves until it takes the change."""

from __future__ import annotations

import pytest

from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import LeaseLost
from tests.cluster.test_pg_log import claim, run


def test_the_next_owner_loads_what_the_last_saved(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        old = await claim(e1, pid)
        await e1.share_states.save(old, "g", b"one", 1)
        await e1.share_states.save(old, "h", b"other", 2)
        await e1.share_states.save(old, "g", b"two", 3)
        await e1.share_states.save(old, "g", b"late", 2)  # landed after seq 3: dropped
        new = await claim(e2, pid)  # node 1 paused past its TTL
        assert await e2.share_states.load(new) == {"g": b"two", "h": b"other"}
        with pytest.raises(LeaseLost):  # node 1 wakes up: refused in the statement
            await e1.share_states.save(old, "g", b"stale", 4)
        await e2.share_states.save(new, "g", b"three", 1)  # a higher epoch wins
        assert await e1.share_states.load(new) == {"g": b"three", "h": b"other"}
        assert [r[:3] for r in await e1.share_states.read_group("g")] == [("t", 0, b"three")]

    run(pg_dsn, scenario)


def test_an_admin_change_fences_the_owners_older_saves(pg_dsn: str) -> None:
    async def scenario(e1: PgEngine, e2: PgEngine, pid: int) -> None:
        plog = await claim(e1, pid)
        await e1.share_states.save(plog, "g", b"before", 1)
        await e1.share_states.save(plog, "h", b"kept", 2)
        assert await e1.share_states.take_resets() == []
        # the coordinator (node 2) moves g's start offset
        await e2.share_states.reset("g", b"reset", "t", 0)
        assert await e2.share_states.take_resets() == []  # its own change
        await e1.share_states.save(plog, "g", b"made before the change", 3)
        assert [r[2] for r in await e2.share_states.read_group("g")] == [b"reset"]
        assert await e1.share_states.take_resets() == [("t", 0, "g", b"reset")]
        assert await e1.share_states.take_resets() == []
        await e1.share_states.save(plog, "g", b"after", 4)  # taken: saves land again
        assert (await e1.share_states.load(plog))["g"] == b"after"
        # DeleteGroups: forgotten, and an older save cannot bring it back
        await e2.share_states.reset("g", None)
        await e1.share_states.save(plog, "g", b"resurrected", 5)
        assert await e1.share_states.load(plog) == {"h": b"kept"}
        assert await e1.share_states.take_resets() == []  # load read the change already
        assert await e2.share_states.read_group("g") == []

    run(pg_dsn, scenario)
