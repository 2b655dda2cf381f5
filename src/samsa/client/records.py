"""Records handed to and returned by the client."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ConsumerRecord", "RecordMetadata"]


class ConsumerRecord(NamedTuple):
    """One consumed record; ``timestamp`` is in milliseconds (type 0 create, 1 log append)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    delivery_count: int | None = None
    """How many times a share group delivered the record, this time included (1 on the
    first delivery); None outside share groups (Kafka's ``deliveryCount()``)."""


class RecordMetadata(NamedTuple):
    """Where a produced record was written."""

    topic: str
    partition: int
    offset: int
    timestamp: int
