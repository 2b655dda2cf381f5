"""Example 3: manual commits after processing - at-least-once delivery.

Records are buffered and inserted into a database in batches; offsets are committed only
after the insert succeeded. A crash between insert and commit re-delivers the last batch
(duplicates are possible, losses are not).

    python examples/consumer_manual_commit.py --bootstrap 127.0.0.1:9092 --topic events
"""

from __future__ import annotations

import argparse
import sqlite3

import samsa


def run(bootstrap: str, topic: str, group: str, db_path: str, *, batch: int = 50,
        max_records: int = 1000, crash_before_commit: bool = False, idle_polls: int = 20
        ) -> int:
    """Insert records into ``db_path`` (table ``events``); returns how many were inserted."""
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE IF NOT EXISTS events (part INT, off INT, value BLOB)")
    inserted = 0
    buffer: list[samsa.client.ConsumerRecord] = []
    consumer = samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                              enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.subscribe([topic])
        idle = 0
        while inserted < max_records and idle < idle_polls:
            records = consumer.poll(timeout_ms=200, max_records=batch - len(buffer))
            idle = 0 if records else idle + 1
            buffer.extend(records)
            if len(buffer) >= batch or (buffer and not records):
                with db:
                    db.executemany("INSERT INTO events VALUES (?, ?, ?)",
                                   [(r.partition, r.offset, r.value) for r in buffer])
                inserted += len(buffer)
                buffer.clear()
                if crash_before_commit:
                    return inserted  # simulated crash: no commit, no clean close
                consumer.commit()
    finally:
        if not crash_before_commit:
            consumer.close()
        else:
            consumer.close(autocommit=False)
        db.close()
    return inserted


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--group", default="manual-commit-example")
    ap.add_argument("--db", default="events.sqlite")
    a = ap.parse_args()
    print(run(a.bootstrap, a.topic, a.group, a.db), "records inserted")
