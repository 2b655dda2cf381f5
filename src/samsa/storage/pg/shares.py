"""Share-partition states in PostgreSQL (:class:`~samsa.broker.storage.ShareStates`).

One row per (partition, share group) in ``samsa_share_states``
(:mod:`~samsa.storage.pg.schema`): the share partition's last
snapshot, as Kafka's ShareSnapshot value (:mod:`samsa.share.records`). A row follows its
partition's lease, not a ``__share_group_state`` partition of its own: only the lease owner
serves the share partition, so only it writes the row, and every save checks the lease in
the same statement (the partition row is locked ``FOR SHARE``, so a save and a claim or
hand-off of the lease are ordered: a save that passed is seen by the next owner's load, and
a save after the lease moved is refused). A node taking the lease reads the partition's
rows in one query. Saves of one node may land out of order (the pool has several
connections): each carries the lease epoch and a sequence number, and an older one never
overwrites a newer one.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.storage import PartitionStore
from samsa.storage.pg.db import Database
from samsa.storage.pg.log import LeaseLost, PgPartitionLog

_SAVE = """
WITH lease AS (
    SELECT pid FROM samsa_partitions WHERE pid = $1 AND owner = $2 AND epoch = $3 FOR SHARE
), saved AS (
    INSERT INTO samsa_share_states AS s (pid, group_id, epoch, seq, state)
    SELECT pid, $4, $3, $5, $6 FROM lease
    ON CONFLICT (pid, group_id) DO UPDATE SET epoch = EXCLUDED.epoch, seq = EXCLUDED.seq,
        state = EXCLUDED.state
    WHERE (s.epoch, s.seq) < (EXCLUDED.epoch, EXCLUDED.seq)
)
SELECT count(*) FROM lease
"""

_FORGET = """
WITH lease AS (
    SELECT pid FROM samsa_partitions WHERE pid = $1 AND owner = $2 AND epoch = $3 FOR SHARE
), gone AS (
    DELETE FROM samsa_share_states s USING lease
    WHERE s.pid = lease.pid AND s.group_id = $4 AND (s.epoch, s.seq) < ($3, $5)
)
SELECT count(*) FROM lease
"""

_GROUP = """
SELECT p.topic, p.idx, s.state FROM samsa_share_states s
JOIN samsa_partitions p ON p.pid = s.pid WHERE s.group_id = $1 ORDER BY p.topic, p.idx
"""


class PgShareStates:
    """The share-partition states of one node (``node_id``)."""

    def __init__(self, db: Database, node_id: int) -> None:
        self.db = db
        self.node_id = node_id

    async def load(self, store: PartitionStore) -> dict[str, bytes]:
        pid = _pid(store)
        rows = await self.db.run(lambda pool: pool.fetch(
            "SELECT group_id, state FROM samsa_share_states WHERE pid = $1", pid))
        return {r["group_id"]: bytes(r["state"]) for r in rows}

    async def save(self, store: PartitionStore, group_id: str, value: bytes | None,
                   seq: int) -> None:
        pid, epoch = _pid(store), store.epoch
        if epoch is None:
            raise LeaseLost(f"partition {pid} is not led here")
        node = self.node_id

        async def job(pool: Any) -> int:
            if value is None:
                return int(await pool.fetchval(_FORGET, pid, node, epoch, group_id, seq))
            return int(await pool.fetchval(_SAVE, pid, node, epoch, group_id, seq, value))

        if not await self.db.run(job):
            raise LeaseLost(f"the lease of partition {pid} moved on from epoch {epoch}")

    async def read_group(self, group_id: str) -> list[tuple[str, int, bytes]]:
        rows = await self.db.run(lambda pool: pool.fetch(_GROUP, group_id))
        return [(r["topic"], r["idx"], bytes(r["state"])) for r in rows]


def _pid(store: PartitionStore) -> int:
    assert isinstance(store, PgPartitionLog), "a partition of another engine"
    return store.pid
