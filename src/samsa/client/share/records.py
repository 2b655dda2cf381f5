"""How a share consumer's records are cut from a ShareFetch answer: the acquired offsets
only, each with its delivery count."""

from __future__ import annotations

from collections.abc import Iterable

from samsa import TopicPartition
from samsa.client.records import ConsumerRecord
from samsa.protocol.records import decode_batches

__all__ = ["acquired_records"]


def acquired_records(tp: TopicPartition, data: bytes | None,
                     acquired: Iterable[tuple[int, int, int]], check_crcs: bool = True
                     ) -> tuple[list[ConsumerRecord], list[int]]:
    """The records of ``data`` inside the ``acquired`` ranges (first, last, delivery
    count), in offset order, and the acquired offsets with no record (GAPs to acknowledge:
    compacted away or transaction markers)."""
    ranges = sorted(acquired)
    if not ranges:
        return [], []
    count: dict[int, int] = {}
    for first, last, delivery in ranges:
        for offset in range(first, last + 1):
            count[offset] = delivery
    out: list[ConsumerRecord] = []
    seen: set[int] = set()
    if data:
        for batch in decode_batches(data, check_crc=check_crcs):
            if batch.is_control:
                continue
            for offset, ts, key, value, headers in batch.records:
                times = count.get(offset)
                if times is not None and offset not in seen:
                    seen.add(offset)
                    out.append(ConsumerRecord(tp.topic, tp.partition, offset, ts,
                                              batch.timestamp_type, key, value, headers,
                                              times))
    out.sort(key=lambda r: r.offset)
    gaps = sorted(o for o in count if o not in seen)
    return out, gaps
