"""Examples 1-2: the simplest consumer - a group member whose offsets commit automatically.

Offsets of what ``poll`` returned are committed every ``auto_commit_interval_ms`` and once
more on ``close()``, so a restarted member continues where the group left off.

    python examples/consumer_autocommit.py --bootstrap 127.0.0.1:9092 --topic events
"""

from __future__ import annotations

import argparse

import samsa


def run(bootstrap: str, topic: str, group: str, max_records: int,
        idle_polls: int = 20) -> list[tuple[int, int, bytes | None]]:
    """Consume until ``max_records`` or ``idle_polls`` empty polls; (partition, offset, value)."""
    seen: list[tuple[int, int, bytes | None]] = []
    with samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                        enable_auto_commit=True, auto_commit_interval_ms=1000,
                        auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        idle = 0
        while len(seen) < max_records and idle < idle_polls:
            records = consumer.poll(timeout_ms=200)
            idle = 0 if records else idle + 1
            for r in records:
                print(f"offset = {r.offset}, key = {r.key!r}, value = {r.value!r}")
                seen.append((r.partition, r.offset, r.value))
    return seen  # close() committed the positions


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--group", default="autocommit-example")
    ap.add_argument("--max-records", type=int, default=1000)
    a = ap.parse_args()
    run(a.bootstrap, a.topic, a.group, a.max_records)
