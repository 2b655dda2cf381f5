"""Build real v2 record batches for tests (via kio's record writer)."""

from __future__ import annotations

import datetime
import io

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch


def make_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int | None = None,
) -> bytes:
    """One uncompressed v2 batch with base offset 0 and valid CRC."""
    ts = (
        datetime.datetime.now(datetime.UTC)
        if timestamp_ms is None
        else datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    )
    recs = tuple(
        Record(attributes=0, timestamp=ts, offset=i, key=k, value=v, headers=())  # type: ignore[arg-type]
        for i, (k, v) in enumerate(records)
    )
    batch = NewRecordBatch(producer_id=producer_id, producer_epoch=producer_epoch,  # type: ignore[arg-type]
                           base_sequence=base_sequence, records=recs, attributes=0)  # type: ignore[arg-type]
    buf = io.BytesIO()
    write_new_batch(buf, batch)
    return buf.getvalue()
