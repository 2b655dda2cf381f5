"""Share-partition states in PostgreSQL (:mod:`samsa.storage.pg.shares`) against a real
database, two nodes' engines: a save is fenced by the partition's lease, the next owner
loads what the last one saved, a late save never overwrites a newer one, and an admin
change from another node fences the owner's older saves until it takes the change. And the
load logic, pure: what a new leader makes of a saved state."""

from __future__ import annotations

import pytest

from samsa.broker.shares import at_limit_archived
from samsa.share import (
    AckType,
    Acquired,
    SharePartition,
    SharePartitionConfig,
)
from samsa.share.records import ShareSnapshot, decode_snapshot, encode_snapshot
from samsa.storage.pg.engine import PgEngine
from samsa.storage.pg.log import LeaseLost
from tests.cluster.test_pg_log import claim, run
from tests.share.simulation import SimTimer


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


def _moved(part: SharePartition, limit: int) -> SharePartition:
    """``part``'s state as a cluster saves it (acquisitions counted, through the
    ShareSnapshot bytes of the table), taken by a new leader."""
    durable = part.durable(count_acquired=True)
    raw = encode_snapshot(ShareSnapshot(0, durable.start_offset, durable.batches()))
    loaded = at_limit_archived(decode_snapshot(raw).durable(), limit)
    return SharePartition.from_durable("p", loaded, SimTimer(), SharePartitionConfig(1_000, limit))


def test_a_new_leader_redelivers_what_was_acquired_and_archives_at_the_limit() -> None:
    """The load logic, pure: records acquired on the old leader come back with a higher
    delivery count, accepted ones never, and one acquired for its last allowed delivery is
    archived (a count never passes the limit)."""
    old = SharePartition("p", 0, SimTimer(), SharePartitionConfig(1_000, 3))
    assert old.acquire("a", 4, 4, 0) == (Acquired(0, 3, 1),)
    assert old.acknowledge("a", [(0, 0, [AckType.ACCEPT]), (3, 3, [AckType.RELEASE])], 1)[0] == 0
    new = _moved(old, 3)
    assert new.start_offset == 1
    assert new.acquire("b", 4, 10, 2) == (Acquired(1, 3, 2),)
    assert new.acknowledge("b", [(1, 1, [AckType.RELEASE])], 3)[0] == 0
    assert new.acquire("b", 4, 10, 4) == (Acquired(1, 1, 3),)  # its last delivery
    newer = _moved(new, 3)  # dies again: offset 1 is archived, 2 and 3 come back
    assert newer.acquire("c", 4, 10, 5) == (Acquired(2, 3, 3),)
    assert newer.start_offset == 2
