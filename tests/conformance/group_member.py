"""A confluent-kafka group member in its own process (for tests that SIGKILL it).

Usage: python -m tests.conformance.group_member BOOTSTRAP GROUP TOPIC SESSION_TIMEOUT_MS
Prints ``assigned <p,p,...>`` on every assignment change and ``consumed <n>`` as it goes;
runs until killed (or 120 s, a bound for stray processes).
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, session = sys.argv[1:5]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "doomed",
                  "session.timeout.ms": int(session), "heartbeat.interval.ms": 200,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    last: list[int] | None = None
    consumed = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for m in c.consume(100, timeout=0.05):
            if m.error() is None:
                consumed += 1
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            last = now
            print("assigned " + ",".join(map(str, now)), flush=True)
            print(f"consumed {consumed}", flush=True)


if __name__ == "__main__":
    main()
