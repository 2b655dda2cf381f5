"""A partition's producer state rebuilt from its stored batches when a node starts leading it.

Idempotence needs each producer's last batches (:data:`~samsa.storage.pg.schema.PRODUCER_HEADERS`:
the last five of each); transactions need more: every transactional batch header from the
log start and the type of every marker, so that the open transactions (the last stable
offset) and the aborted ones (what read_committed fetches skip) are exactly what the
previous leader had. The log is the durable record of both; a new leader replays it, in
offset order, as the local engine does when it opens a log.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from samsa.log.producer_state import ProducerStateManager
from samsa.protocol.batch import BATCH_OVERHEAD, header_from_bytes
from samsa.protocol.records import control_type
from samsa.storage.pg import schema
from samsa.storage.pg.db import Database

_CONTROL_HEAD = BATCH_OVERHEAD + 32
"""A marker's header and the start of its one record, up to its key's type."""

#: Every transactional batch (attributes bit 4; the attributes' low byte is byte 22 of the
#: stored batch) of partition $1 from offset $2: its header, a marker's record too.
TXN_HEADERS = f"""
SELECT base_offset, substring(data from 1 for {_CONTROL_HEAD}) AS header
FROM samsa_batches WHERE pid = $1 AND producer_id >= 0 AND base_offset >= $2
  AND get_byte(data, 22) & 16 <> 0
ORDER BY base_offset
"""


async def load_producers(db: Database, pid: int, log_start: int) -> ProducerStateManager:
    """The producer state of partition ``pid`` from ``log_start``."""
    async def job(pool: Any) -> tuple[list[Any], list[Any]]:
        async with pool.acquire() as conn:
            recent = await conn.fetch(schema.PRODUCER_HEADERS, pid, log_start)
            txns = await conn.fetch(TXN_HEADERS, pid, log_start)
        return list(recent), list(txns)

    recent, txns = await db.run(job)
    rows: dict[int, bytes] = {r["base_offset"]: bytes(r["header"]) for r in recent}
    rows.update((r["base_offset"], bytes(r["header"])) for r in txns)
    producers = ProducerStateManager()
    for base in sorted(rows):
        data = rows[base]
        header = replace(header_from_bytes(data, 0), base_offset=base)
        control = control_type(data, replace(header, position=0)) if header.is_control else None
        producers.replay(header, control)
    producers.remove_before(log_start)
    return producers
