"""Examples 5 and 8: offsets stored outside the broker - exactly-once into SQLite.

Each processed record and the partition's next offset are written in the same SQLite
transaction. The rebalance listener makes group membership work with it: when partitions
are assigned the consumer seeks to the offsets stored in the database; on revocation
nothing needs to be committed, since the database is always consistent. Restarting the
consumer (or moving partitions to another member) never loses or duplicates a row. With
``rewind=True`` the listener instead seeks to the beginning (example 8's rewind through
external storage: the stored offsets are reset and the partitions re-processed).

    python examples/consumer_external_offsets.py --topic events --db sink.sqlite
"""

from __future__ import annotations

import argparse
import sqlite3

import samsa
from samsa import TopicPartition


class SqliteOffsets(samsa.ConsumerRebalanceListener):
    """Seeks assigned partitions to the offsets saved with the data."""

    def __init__(self, consumer: samsa.Consumer, db: sqlite3.Connection,
                 rewind: bool = False) -> None:
        self.consumer = consumer
        self.db = db
        self.rewind = rewind
        self.assigned: list[set[TopicPartition]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass  # every processed record's offset is already in the database

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assigned.append(set(assigned))
        for tp in assigned:
            if self.rewind:
                with self.db:
                    self.db.execute("DELETE FROM offsets WHERE topic=? AND part=?",
                                    (tp.topic, tp.partition))
                self.consumer.seek_to_beginning(tp)
                continue
            row = self.db.execute("SELECT next FROM offsets WHERE topic=? AND part=?",
                                  (tp.topic, tp.partition)).fetchone()
            if row is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, row[0])


def open_db(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("CREATE TABLE IF NOT EXISTS sink (topic TEXT, part INT, off INT, value BLOB,"
               " PRIMARY KEY (topic, part, off))")
    db.execute("CREATE TABLE IF NOT EXISTS offsets (topic TEXT, part INT, next INT,"
               " PRIMARY KEY (topic, part))")
    return db


def run(bootstrap: str, topic: str, group: str, db_path: str, *, max_records: int = 10**9,
        idle_polls: int = 20, rewind: bool = False) -> int:
    """Process records into ``db_path``; returns the number processed in this run."""
    db = open_db(db_path)
    processed = 0
    consumer = samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                              enable_auto_commit=False)
    try:
        consumer.subscribe([topic], listener=SqliteOffsets(consumer, db, rewind))
        idle = 0
        while processed < max_records and idle < idle_polls:
            records = consumer.poll(timeout_ms=200, max_records=max_records - processed)
            idle = 0 if records else idle + 1
            for r in records:
                with db:  # the row and the offset commit atomically
                    db.execute("INSERT OR REPLACE INTO sink VALUES (?, ?, ?, ?)",
                               (r.topic, r.partition, r.offset, r.value))
                    db.execute("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?)",
                               (r.topic, r.partition, r.offset + 1))
                processed += 1
    finally:
        consumer.close(autocommit=False)
        db.close()
    return processed


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--group", default="external-offsets-example")
    ap.add_argument("--db", default="sink.sqlite")
    ap.add_argument("--rewind", action="store_true")
    a = ap.parse_args()
    print(run(a.bootstrap, a.topic, a.group, a.db, rewind=a.rewind), "records processed")
