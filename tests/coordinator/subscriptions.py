"""Consumer-protocol subscriptions for coordinator tests (the broker only reads them)."""

from __future__ import annotations

import struct


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A v0 subscription."""
    parts = [struct.pack(">hi", 0, len(topics))]
    for t in topics:
        raw = t.encode("utf-8")
        parts.append(struct.pack(">h", len(raw)) + raw)
    if user_data is None:
        parts.append(struct.pack(">i", -1))
    else:
        parts.append(struct.pack(">i", len(user_data)) + user_data)
    return b"".join(parts)
