"""Share-partition states in PostgreSQL (:class:`~samsa.broker.storage.ShareStates`).

One row per (partition, share group) in ``samsa_share_states``
(:mod:`~samsa.storage.pg.schema`): the share partition's last snapshot, as Kafka's
ShareSnapshot value (:mod:`samsa.share.records`). A row follows its partition's lease, not a
``__share_group_state`` partition of its own: only the lease owner serves the share
partition, so only it saves the row, and every save checks the lease in the same statement
(the partition row is locked ``FOR SHARE``, so a save and a claim or hand-off of the lease
are ordered: a save that passed is seen by the next owner's load, and a save after the lease
moved is refused). A node taking the lease reads the partition's rows in one query. Saves
of one node may land out of order (the pool has several connections): each carries the
lease epoch and a sequence number, and an older one never overwrites a newer one.

Admin changes (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups) come from the
group's coordinator, which need not lead the partition: they write the row (a forgotten
state stays as a NULL row) with ``reset`` set to a new count of ``share_resets`` and wake
every node. The owner's saves name the ``reset`` they know, so one made before the change
never lands over it; the owner reads the change on its next tick (:meth:`take_resets`) and
reloads the share partition.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.storage import PartitionStore
from samsa.storage.pg.db import Database
from samsa.storage.pg.leases import CHANNEL
from samsa.storage.pg.log import LeaseLost, PgPartitionLog

_SAVE = """
WITH lease AS (
    SELECT pid FROM samsa_partitions WHERE pid = $1 AND owner = $2 AND epoch = $3 FOR SHARE
), saved AS (
    INSERT INTO samsa_share_states AS s (pid, group_id, epoch, seq, state, reset)
    SELECT pid, $4, $3, $5, $6, $7 FROM lease
    ON CONFLICT (pid, group_id) DO UPDATE SET epoch = EXCLUDED.epoch, seq = EXCLUDED.seq,
        state = EXCLUDED.state
    WHERE s.reset = EXCLUDED.reset AND (s.epoch, s.seq) < (EXCLUDED.epoch, EXCLUDED.seq)
)
SELECT count(*) FROM lease
"""

#: An admin change of the rows of group $1 ($2: of one topic, $3: of one partition) to
#: state $4; with $5 it writes the partition's row even if it has none.
_RESET = """
WITH v AS (
    UPDATE samsa_meta SET v = v + 1 WHERE k = 'share_resets' RETURNING v
), target AS (
    SELECT p.pid, p.epoch FROM samsa_partitions p
    WHERE ($2::text IS NULL OR p.topic = $2) AND ($3::integer IS NULL OR p.idx = $3)
      AND ($5 OR EXISTS (SELECT 1 FROM samsa_share_states s
                         WHERE s.pid = p.pid AND s.group_id = $1))
)
INSERT INTO samsa_share_states AS s (pid, group_id, epoch, seq, state, reset)
SELECT target.pid, $1, target.epoch, 0, $4, v.v FROM target, v
ON CONFLICT (pid, group_id) DO UPDATE SET epoch = EXCLUDED.epoch, seq = 0,
    state = EXCLUDED.state, reset = EXCLUDED.reset
RETURNING s.pid, s.reset
"""

_RESETS = """
SELECT p.topic, p.idx, s.pid, s.group_id, s.state, s.reset FROM samsa_share_states s
JOIN samsa_partitions p ON p.pid = s.pid WHERE s.reset > $1 ORDER BY s.reset
"""

_GROUP = """
SELECT p.topic, p.idx, s.state, p.log_end FROM samsa_share_states s
JOIN samsa_partitions p ON p.pid = s.pid
WHERE s.group_id = $1 AND s.state IS NOT NULL ORDER BY p.topic, p.idx
"""


class PgShareStates:
    """The share-partition states of one node (``node_id``)."""

    def __init__(self, db: Database, node_id: int) -> None:
        self.db = db
        self.node_id = node_id
        #: (pid, group) -> the ``reset`` of the row as this node last read or wrote it
        self._known: dict[tuple[int, str], int] = {}
        self._resets_seen = 0

    async def load(self, store: PartitionStore) -> dict[str, bytes]:
        pid = _pid(store)
        rows = await self.db.run(lambda pool: pool.fetch(
            "SELECT group_id, state, reset FROM samsa_share_states WHERE pid = $1", pid))
        for r in rows:
            self._known[(pid, r["group_id"])] = r["reset"]
        return {r["group_id"]: bytes(r["state"]) for r in rows if r["state"] is not None}

    async def save(self, store: PartitionStore, group_id: str, value: bytes, seq: int) -> None:
        pid, epoch = _pid(store), store.epoch
        if epoch is None:
            raise LeaseLost(f"partition {pid} is not led here")
        args = (pid, self.node_id, epoch, group_id, seq, value,
                self._known.get((pid, group_id), 0))
        if not await self.db.run(lambda pool: pool.fetchval(_SAVE, *args)):
            raise LeaseLost(f"the lease of partition {pid} moved on from epoch {epoch}")

    async def reset(self, group_id: str, value: bytes | None, topic: str | None = None,
                    index: int | None = None) -> None:
        async def job(pool: Any) -> list[Any]:
            async with pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(_RESET, group_id, topic, index, value,
                                        value is not None)
                await conn.execute(f"NOTIFY {CHANNEL}")
                return list(rows)

        for r in await self.db.run(job):
            self._known[(r["pid"], group_id)] = r["reset"]

    async def take_resets(self) -> list[tuple[str, int, str, bytes | None]]:
        rows = await self.db.run(lambda pool: pool.fetch(_RESETS, self._resets_seen))
        out = []
        for r in rows:
            key = (r["pid"], r["group_id"])
            self._resets_seen = max(self._resets_seen, r["reset"])
            if self._known.get(key, 0) < r["reset"]:
                self._known[key] = r["reset"]
                state = r["state"]
                out.append((r["topic"], r["idx"], r["group_id"],
                            None if state is None else bytes(state)))
        return out

    async def read_group(self, group_id: str) -> list[tuple[str, int, bytes, int]]:
        rows = await self.db.run(lambda pool: pool.fetch(_GROUP, group_id))
        return [(r["topic"], r["idx"], bytes(r["state"]), r["log_end"]) for r in rows]


def _pid(store: PartitionStore) -> int:
    assert isinstance(store, PgPartitionLog), "a partition of another engine"
    return store.pid
