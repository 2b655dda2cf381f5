"""The one piece of the consumer protocol the broker reads: subscribed topics.

Every ConsumerProtocolSubscription version starts with the v0 layout
``{version int16, topics [string], user_data nullable bytes}``, so the topic list is
readable whatever the client's version.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """Topics of a consumer subscription; ``None`` if the bytes cannot be parsed."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if count < 0:
            return None
        topics: set[str] = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(metadata[pos : pos + n].decode("utf-8"))
            pos += n
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None
