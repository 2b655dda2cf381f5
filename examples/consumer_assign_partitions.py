"""Example 4: consume specific partitions (no group management, no rebalancing).

The consumer reads the partitions it is given up to their current end and stops. A
``group_id`` is optional: it is only used to commit offsets.

    python examples/consumer_assign_partitions.py --topic events --partitions 0 1
"""

from __future__ import annotations

import argparse

import samsa
from samsa import TopicPartition


def run(bootstrap: str, topic: str, partitions: list[int],
        group: str | None = None) -> dict[int, list[bytes | None]]:
    """Read ``partitions`` from the beginning to their end offsets; values per partition."""
    tps = [TopicPartition(topic, p) for p in partitions]
    out: dict[int, list[bytes | None]] = {p: [] for p in partitions}
    with samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                        enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        end = consumer.end_offsets(tps)
        while any(consumer.position(tp) < end[tp] for tp in tps):
            for r in consumer.poll(timeout_ms=500):
                out[r.partition].append(r.value)
        if group is not None:
            consumer.commit()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--partitions", type=int, nargs="+", default=[0])
    a = ap.parse_args()
    for p, values in run(a.bootstrap, a.topic, a.partitions).items():
        print(f"partition {p}: {len(values)} records")
