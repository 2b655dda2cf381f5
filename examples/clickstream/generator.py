"""Click-event generator: JSON events ``{"user", "page", "ts"}`` keyed by user.

Event times advance ``step_ms`` per event from ``start_ms`` (so a demo covers many minutes
of event time in seconds); ``seed`` makes runs reproducible.

    python -m examples.clickstream.generator --bootstrap 127.0.0.1:9092 --events 10000
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass

from samsa import Producer

PAGES = ("/", "/search", "/product", "/cart", "/checkout")


@dataclass(frozen=True)
class Click:
    user: str
    page: str
    ts_ms: int

    def to_json(self) -> bytes:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.ts_ms // 1000))
        return json.dumps({"user": self.user, "page": self.page,
                           "ts": f"{ts}.{self.ts_ms % 1000:03d}Z"}).encode()


def clicks(count: int, start_ms: int, step_ms: int = 100, seed: int = 0) -> list[Click]:
    rnd = random.Random(seed)
    return [Click(f"user-{rnd.randrange(50)}", rnd.choice(PAGES), start_ms + i * step_ms)
            for i in range(count)]


def send(bootstrap: str, topic: str, events: list[Click]) -> None:
    """Write ``events`` (idempotent producer, acks=all) and wait until all are stored."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=10) as producer:
        futures = [producer.send(topic, e.to_json(), e.user.encode(), timestamp_ms=e.ts_ms)
                   for e in events]
        producer.flush()
        for f in futures:
            f.result(30)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="write click events to a topic")
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="clicks")
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--step-ms", type=int, default=100, help="event-time step per event")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    now = int(time.time() * 1000)
    send(a.bootstrap, a.topic, clicks(a.events, now, a.step_ms, a.seed))
    print(f"wrote {a.events} click events to {a.topic}")
