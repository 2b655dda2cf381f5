"""Example 6: seek back after a processing failure.

``process`` handles a batch and reports the last offset it consumed per partition. When a
partition's processing fails, the consumer seeks that partition back to just after its
last successfully processed offset, so the failed records are fetched again (without any
rebalance and without touching other members). Offsets are committed every
``commit_interval`` records.

    python examples/consumer_seek_on_failure.py --topic events
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field

import samsa
from samsa import TopicPartition
from samsa.client import ConsumerRecord


@dataclass
class Stats:
    processed: list[ConsumerRecord] = field(default_factory=list)
    failures: int = 0


def run(bootstrap: str, topic: str, group: str, expected: int,
        handle: Callable[[ConsumerRecord], None], commit_interval: int = 100) -> Stats:
    """Process ``expected`` records with ``handle`` (which may raise to signal failure)."""
    stats = Stats()
    consumed: dict[TopicPartition, int] = {}
    since_commit = 0
    with samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                        enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        while len(stats.processed) < expected:
            records = consumer.poll(timeout_ms=200)
            failed: set[TopicPartition] = set()
            for r in records:
                tp = TopicPartition(r.topic, r.partition)
                if tp in failed:
                    continue  # skip the rest of a failed partition's batch
                try:
                    handle(r)
                except Exception:
                    stats.failures += 1
                    failed.add(tp)
                    continue
                stats.processed.append(r)
                consumed[tp] = r.offset
                since_commit += 1
            for tp in failed:  # re-fetch from the first unprocessed record
                last = consumed.get(tp)
                if last is None:
                    committed = consumer.committed(tp)
                    consumer.seek(tp, committed if committed is not None else 0)
                else:
                    consumer.seek(tp, last + 1)
            if since_commit >= commit_interval:
                consumer.commit({tp: off + 1 for tp, off in consumed.items()})
                since_commit = 0
        consumer.commit({tp: off + 1 for tp, off in consumed.items()})
    return stats


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--group", default="seek-example")
    ap.add_argument("--expected", type=int, default=100)
    a = ap.parse_args()
    run(a.bootstrap, a.topic, a.group, a.expected, lambda r: print(r.offset, r.value))
