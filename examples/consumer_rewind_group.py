"""Example 7: rewind a whole group through the rebalance listener.

After a bug fix every member restarts with ``rewind=True``: as partitions are assigned the
listener seeks them back (to the beginning, or to the first offset at or after
``rewind_to_ms``). Rolling restarts rebalance the group, so eventually every partition is
rewound by whichever member owns it.

    python examples/consumer_rewind_group.py --topic events --rewind
"""

from __future__ import annotations

import argparse

import samsa
from samsa import TopicPartition


class Rewinder(samsa.ConsumerRebalanceListener):
    def __init__(self, consumer: samsa.Consumer, rewind: bool,
                 rewind_to_ms: int | None = None) -> None:
        self.consumer = consumer
        self.rewind = rewind
        self.rewind_to_ms = rewind_to_ms

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if not self.rewind or not assigned:
            return
        if self.rewind_to_ms is None:
            self.consumer.seek_to_beginning(*assigned)
            return
        for tp, offset in self.consumer.offsets_for_times(
                dict.fromkeys(assigned, self.rewind_to_ms)).items():
            if offset is None:
                self.consumer.seek_to_end(tp)
            else:
                self.consumer.seek(tp, offset)


def run(bootstrap: str, topic: str, group: str, *, rewind: bool, max_records: int,
        rewind_to_ms: int | None = None, idle_polls: int = 15) -> list[tuple[int, int]]:
    """Consume with auto-commit; returns (partition, offset) of what was consumed."""
    out: list[tuple[int, int]] = []
    with samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                        auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic], listener=Rewinder(consumer, rewind, rewind_to_ms))
        idle = 0
        while len(out) < max_records and idle < idle_polls:
            records = consumer.poll(timeout_ms=200)
            idle = 0 if records else idle + 1
            out += [(r.partition, r.offset) for r in records]
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--group", default="rewind-example")
    ap.add_argument("--rewind", action="store_true")
    a = ap.parse_args()
    print(len(run(a.bootstrap, a.topic, a.group, rewind=a.rewind, max_records=10**9)))
