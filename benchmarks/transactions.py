"""Transactions against idempotence, with confluent-kafka (librdkafka) or samsa's own
producer (``--client samsa``) on one samsa broker.

Produces the same records (100 B values, acks=all) three ways: idempotent, in transactions
of 10,000 records and in transactions of 100, and prints records/s and each transactional
rate as a ratio of the idempotent one (the aim: >= 0.7x for large transactions). The
transactional cases run twice, with the partition leader's verification of each
transaction's first batch (KIP-890 part 1, ``transaction.partition.verification.enable``)
on and turned off (dynamically, between cases), to show what it costs. Then
fetches the topic written transactionally with read_committed and with read_uncommitted
and prints both rates and their ratio, and where a 100-record transaction spends its time
(:func:`phases`: median and p90 per phase). Each producer is warmed up (connections, producer id,
one record) before it is timed. Cases alternate over ``--repeat`` rounds (the VM's
speed drifts); the best round of each is reported.

    .venv/bin/python benchmarks/transactions.py [--records N] [--repeat N] [--client samsa]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.brokerproc import BrokerProcess
from tests.conformance.test_transactions_verify import set_verification

VALUE = b"x" * 100


class _SamsaProducer:
    """``samsa.Producer`` behind the few confluent-kafka calls :func:`produce` makes."""

    def __init__(self, conf: dict[str, object]) -> None:
        self.p = samsa.Producer(bootstrap_servers=conf["bootstrap.servers"],
                                linger_ms=conf["linger.ms"],
                                transactional_id=conf.get("transactional.id"))
        self.init_transactions = self.p.init_transactions
        self.begin_transaction = self.p.begin_transaction
        self.commit_transaction = self.p.commit_transaction
        self.flush = self.p.flush

    def produce(self, topic: str, value: bytes, partition: int) -> None:
        self.p.send(topic, value, partition=partition)

    def poll(self, timeout: float) -> None:
        pass


def produce(bootstrap: str, topic: str, records: int, txn_size: int | None,
            client: str = "confluent") -> float:
    """Records/s of one producer; ``txn_size`` records per transaction, None: idempotent."""
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": "all",
                               "enable.idempotence": True, "linger.ms": 5}
    if txn_size is not None:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p: Any = Producer(conf) if client == "confluent" else _SamsaProducer(conf)
    # warm up (connections, metadata, the producer id) outside the timing
    if txn_size is not None:
        p.init_transactions(30)
        p.begin_transaction()
    p.produce(topic, VALUE, partition=0)
    if txn_size is not None:
        p.commit_transaction(60)
    p.flush(60)
    start = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(txn_size or records, records - sent)
        if txn_size is not None:
            p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, VALUE, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        sent += n
        if txn_size is not None:
            p.commit_transaction(60)
    p.flush(60)
    rate = records / (time.perf_counter() - start)
    if isinstance(p, _SamsaProducer):
        p.p.close()
    return rate


def phases(bootstrap: str, topic: str, transactions: int = 300) -> dict[str, list[float]]:
    """Where a transaction of 100 records spends its time, in seconds per transaction:
    begin + AddPartitionsToTxn + the first record durable, the other 99 records, and the
    commit (EndTxn: PrepareCommit durable; the markers follow in the background, and the
    next transaction's AddPartitionsToTxn waits for them)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "transactional.id": f"phases-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    out: dict[str, list[float]] = {"begin, add, 1st record": [], "99 records": [],
                                   "commit": []}
    for _ in range(transactions):
        t0 = time.perf_counter()
        p.begin_transaction()
        p.produce(topic, VALUE, partition=0)
        p.flush(30)
        t1 = time.perf_counter()
        for _ in range(99):
            p.produce(topic, VALUE, partition=0)
        p.flush(30)
        t2 = time.perf_counter()
        p.commit_transaction(30)
        t3 = time.perf_counter()
        for name, took in zip(out, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            out[name].append(took)
    return out


def fetch(bootstrap: str, topic: str, records: int, isolation: str) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got, start = 0, None
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10_000, 0.5):
            if m.error():
                continue
            if start is None:
                start = time.perf_counter()
            got += 1
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    if got < records:
        raise SystemExit(f"{isolation}: read {got} of {records}")
    return records / max(elapsed, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--client", choices=("confluent", "samsa"), default="confluent",
                        help="the producer (the reads use confluent-kafka)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", {
            "transaction.state.log.num.partitions": "1",
            "offsets.topic.num.partitions": "1"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            cases = {"idempotent": None, "txn 10000": 10_000, "txn 100": 100,
                     "txn 10000 unverified": 10_000, "txn 100 unverified": 100}
            best: dict[str, float] = dict.fromkeys(cases, 0.0)
            reads: dict[str, float] = {"read_uncommitted": 0.0, "read_committed": 0.0}
            for _ in range(args.repeat):
                for name, size in cases.items():
                    set_verification(broker.bootstrap, not name.endswith("unverified"))
                    topic = f"bench-{uuid.uuid4().hex[:8]}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    best[name] = max(best[name],
                                     produce(broker.bootstrap, topic, args.records, size,
                                             args.client))
                    if name == "txn 100":  # read back the many-transactions topic
                        for isolation in reads:
                            reads[isolation] = max(reads[isolation], fetch(
                                broker.bootstrap, topic, args.records + 1, isolation))
                    admin.delete_topics([topic])[topic].result(30)
            set_verification(broker.bootstrap, True)
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            split = phases(broker.bootstrap, topic)
        finally:
            broker.stop()
    base = best["idempotent"]
    print(f"{'case':<33}{'records/s':>12}{'ratio':>8}")
    for name, rate in best.items():
        print(f"{'produce ' + name:<33}{rate:>12,.0f}{rate / base:>8.2f}")
    plain = reads["read_uncommitted"]
    for name, rate in reads.items():
        print(f"{'fetch ' + name:<33}{rate:>12,.0f}{rate / plain:>8.2f}")
    print(f"\n{'100-record txn phase':<24}{'median ms':>10}{'p90 ms':>10}")
    for name, took in split.items():
        ordered = sorted(took)
        print(f"{name:<24}{statistics.median(ordered) * 1000:>10.2f}"
              f"{ordered[int(len(ordered) * 0.9)] * 1000:>10.2f}")


if __name__ == "__main__":
    main()
