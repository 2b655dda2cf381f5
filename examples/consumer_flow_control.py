"""Flow control with pause/resume: let a lagging stream catch up before joining two streams.

The consumer reads two topics; whenever one stream's newest timestamp runs ahead of the
other's by more than ``max_skew_ms`` its partitions are paused, and resumed once the other
catches up. Paused partitions are not fetched, and buffered data for them is dropped.

    python examples/consumer_flow_control.py --left clicks --right views
"""

from __future__ import annotations

import argparse

import samsa


def run(bootstrap: str, left: str, right: str, group: str, expected: int,
        max_skew_ms: int = 1000) -> tuple[list[tuple[str, int]], int]:
    """Consume both topics; returns ((topic, timestamp) in consumption order, pauses)."""
    seen: list[tuple[str, int]] = []
    newest = {left: -1, right: -1}
    pauses = 0
    with samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                        auto_offset_reset="earliest", max_poll_records=20) as consumer:
        consumer.subscribe([left, right])
        while len(seen) < expected:
            for r in consumer.poll(timeout_ms=200):
                seen.append((r.topic, r.timestamp))
                newest[r.topic] = max(newest[r.topic], r.timestamp)
            for ahead, behind in ((left, right), (right, left)):
                parts = {tp for tp in consumer.assignment() if tp.topic == ahead}
                exhausted = _caught_up(consumer, behind)
                if newest[ahead] - newest[behind] > max_skew_ms and not exhausted:
                    if not parts <= consumer.paused():
                        pauses += 1
                        consumer.pause(*parts)
                elif parts & consumer.paused():
                    consumer.resume(*parts)
    return seen, pauses


def _caught_up(consumer: samsa.Consumer, topic: str) -> bool:
    parts = [tp for tp in consumer.assignment() if tp.topic == topic]
    if not parts:
        return True
    end = consumer.end_offsets(parts)
    return all(consumer.position(tp) >= end[tp] for tp in parts)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--left", default="clicks")
    ap.add_argument("--right", default="views")
    ap.add_argument("--expected", type=int, default=100)
    a = ap.parse_args()
    print(run(a.bootstrap, a.left, a.right, "flow-example", a.expected)[1], "pauses")
