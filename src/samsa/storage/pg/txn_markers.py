"""The cluster's transaction mailboxes: markers forwarded to the partitions' owners, and
KIP-890's implicit adds forwarded to the transaction's coordinator.

A transaction's coordinator (the node holding its ``__transaction_state`` shard) writes the
markers of the partitions it leads itself; for a partition another node leads it inserts a
row into ``samsa_txn_markers`` (partition, producer id and epoch, commit or abort, the
coordinator epoch), fenced by its own shard lease: a coordinator that lost its shard
inserts nothing. It then NOTIFYs the nodes. Each node, on every tick, takes the rows of the
partitions it leads, appends each marker through its partition store (under its own lease
epoch, as any append), and deletes the row once the marker is durable. The coordinator
completes the transaction once its rows are gone.

The rows are as durable as the log: a coordinator killed after inserting them is replaced
by one that reloads the shard and inserts them again (idempotent); an owner killed before
deleting a row is replaced by one that writes the marker again (a second marker for a
closed transaction changes nothing). A row of a deleted topic goes with its partition.

Transactions v2 add a partition to its transaction implicitly: the partition's leader (a
Produce v12) or the group's coordinator (a TxnOffsetCommit v5) asks the transaction's
coordinator. Between nodes that question is a row of ``samsa_txn_adds`` (the id's shard,
transactional id, producer id and epoch, the partitions), announced with ``NOTIFY``; the
node holding the shard answers it on its next tick (the error code in ``answer``), and the
asking node reads the answer and deletes the row (:class:`AddMailbox`). The same mailbox
carries KIP-890 part 1's verifications (``verify_only``: is the partition in the
producer's open transaction? TRANSACTION_ABORTABLE when it is not), one partition a row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from samsa.storage.pg.db import Database

DDL = """
CREATE TABLE IF NOT EXISTS samsa_txn_markers (
    pid bigint NOT NULL REFERENCES samsa_partitions(pid) ON DELETE CASCADE,
    producer_id bigint NOT NULL,
    producer_epoch integer NOT NULL,
    commit boolean NOT NULL,
    coordinator_epoch integer NOT NULL,
    PRIMARY KEY (pid, producer_id, producer_epoch)
);
CREATE TABLE IF NOT EXISTS samsa_txn_adds (
    id bigserial PRIMARY KEY,
    shard integer NOT NULL,
    transactional_id text NOT NULL,
    producer_id bigint NOT NULL,
    producer_epoch integer NOT NULL,
    partitions jsonb NOT NULL,
    answer integer,
    asked_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE samsa_txn_adds ADD COLUMN IF NOT EXISTS verify_only boolean NOT NULL DEFAULT false;
"""

#: Insert the markers of a transaction for partitions ($6 topics, $7 indexes) if node $2
#: still holds ``__transaction_state`` partition $1 at epoch $3; the pids inserted.
_FORWARD = """
INSERT INTO samsa_txn_markers (pid, producer_id, producer_epoch, commit, coordinator_epoch)
SELECT p.pid, $4, $5, $8, $3 FROM samsa_partitions p
JOIN unnest($6::text[], $7::integer[]) AS v(topic, idx) ON p.topic = v.topic AND p.idx = v.idx
WHERE EXISTS (SELECT 1 FROM samsa_partitions c WHERE c.topic = '__transaction_state'
              AND c.idx = $1 AND c.owner = $2 AND c.epoch = $3)
ON CONFLICT (pid, producer_id, producer_epoch) DO UPDATE
    SET commit = EXCLUDED.commit, coordinator_epoch = EXCLUDED.coordinator_epoch
    WHERE samsa_txn_markers.coordinator_epoch <= EXCLUDED.coordinator_epoch
RETURNING pid
"""

_PENDING = """
SELECT m.pid, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch
FROM samsa_txn_markers m JOIN samsa_partitions p ON p.pid = m.pid WHERE p.owner = $1
"""


@dataclass(frozen=True, slots=True)
class MarkerRow:
    """One marker to write."""

    pid: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class MarkerMailbox:
    """The mailbox SQL of one node (``node_id``)."""

    def __init__(self, db: Database, node_id: int) -> None:
        self.db = db
        self.node_id = node_id

    async def forward(self, shard: int, coordinator_epoch: int, producer_id: int,
                      producer_epoch: int, commit: bool,
                      partitions: list[tuple[str, int]]) -> list[int] | None:
        """Post the markers for ``partitions``; the pids posted, None when this node does
        not hold ``__transaction_state`` partition ``shard`` at ``coordinator_epoch``."""
        async def job(pool: Any) -> list[int] | None:
            async with pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(
                    _FORWARD, shard, self.node_id, coordinator_epoch, producer_id,
                    producer_epoch, [t for t, _ in partitions], [i for _, i in partitions],
                    commit)
                if not rows:
                    held = await conn.fetchval(
                        "SELECT 1 FROM samsa_partitions WHERE topic = '__transaction_state' "
                        "AND idx = $1 AND owner = $2 AND epoch = $3", shard, self.node_id,
                        coordinator_epoch)
                    if held is None:
                        return None
            return [int(r["pid"]) for r in rows]

        return await self.db.run(job)

    async def remaining(self, pids: list[int], producer_id: int, producer_epoch: int) -> int:
        """How many of the markers posted for ``pids`` are not written yet."""
        return int(await self.db.run(lambda pool: pool.fetchval(
            "SELECT count(*) FROM samsa_txn_markers WHERE pid = ANY($1::bigint[]) "
            "AND producer_id = $2 AND producer_epoch = $3", pids, producer_id,
            producer_epoch)))

    async def pending(self) -> list[MarkerRow]:
        """The markers posted for partitions this node leads."""
        rows = await self.db.run(lambda pool: pool.fetch(_PENDING, self.node_id))
        return [MarkerRow(r["pid"], r["producer_id"], r["producer_epoch"], r["commit"],
                          r["coordinator_epoch"]) for r in rows]

    async def done(self, row: MarkerRow) -> None:
        """``row``'s marker is durable: take it out of the mailbox."""
        await self.db.run(lambda pool: pool.execute(
            "DELETE FROM samsa_txn_markers WHERE pid = $1 AND producer_id = $2 "
            "AND producer_epoch = $3 AND commit = $4 AND coordinator_epoch = $5",
            row.pid, row.producer_id, row.producer_epoch, row.commit, row.coordinator_epoch))


@dataclass(frozen=True, slots=True)
class AddRow:
    """One implicit add to answer."""

    id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    verify_only: bool = False


_ADDS = """
SELECT a.id, a.transactional_id, a.producer_id, a.producer_epoch, a.partitions, a.verify_only
FROM samsa_txn_adds a JOIN samsa_partitions p
  ON p.topic = '__transaction_state' AND p.idx = a.shard
WHERE p.owner = $1 AND a.answer IS NULL
"""


class AddMailbox:
    """The implicit-add SQL of one node (``node_id``)."""

    def __init__(self, db: Database, node_id: int) -> None:
        self.db = db
        self.node_id = node_id

    async def ask(self, shard: int, transactional_id: str, producer_id: int,
                  producer_epoch: int, partitions: list[tuple[str, int]],
                  verify_only: bool = False) -> int:
        """Post a question for the holder of ``__transaction_state`` partition ``shard``;
        its id."""
        return int(await self.db.run(lambda pool: pool.fetchval(
            "INSERT INTO samsa_txn_adds (shard, transactional_id, producer_id, "
            "producer_epoch, partitions, verify_only) VALUES ($1, $2, $3, $4, $5, $6) "
            "RETURNING id",
            shard, transactional_id, producer_id, producer_epoch,
            json.dumps([[t, i] for t, i in partitions]), verify_only)))

    async def answer_of(self, add_id: int) -> int | None:
        """The answer to question ``add_id`` (None while unanswered)."""
        found = await self.db.run(lambda pool: pool.fetchval(
            "SELECT answer FROM samsa_txn_adds WHERE id = $1", add_id))
        return None if found is None else int(found)

    async def forget(self, add_id: int) -> None:
        await self.db.run(lambda pool: pool.execute(
            "DELETE FROM samsa_txn_adds WHERE id = $1", add_id))

    async def questions(self) -> list[AddRow]:
        """The unanswered questions for the shards this node holds (questions older than
        a minute, whose asker gave up or died, are dropped)."""
        async def job(pool: Any) -> list[Any]:
            async with pool.acquire() as conn:
                await conn.execute("DELETE FROM samsa_txn_adds "
                                   "WHERE asked_at < now() - interval '1 minute'")
                return list(await conn.fetch(_ADDS, self.node_id))

        rows = await self.db.run(job)
        return [AddRow(r["id"], r["transactional_id"], r["producer_id"], r["producer_epoch"],
                       tuple((t, int(i)) for t, i in json.loads(r["partitions"])),
                       r["verify_only"])
                for r in rows]

    async def answer(self, add_id: int, code: int) -> None:
        await self.db.run(lambda pool: pool.execute(
            "UPDATE samsa_txn_adds SET answer = $2 WHERE id = $1", add_id, code))
