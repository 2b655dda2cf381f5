"""Client throughput: samsa vs kafka-python vs confluent-kafka against one samsa broker.

Produces N records of 100 bytes with each producer (one topic each), then consumes the same
N records with each consumer, and prints records/s and ratios. Run::

    .venv/bin/python benchmarks/clients.py               # 1,000,000 records
    .venv/bin/python benchmarks/clients.py --records 200000 --partitions 4

Starts its own broker on 127.0.0.1 (data in a temporary directory) unless --bootstrap.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

VALUE = b"x" * 100
Result = tuple[str, str, float]


def start_broker(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``samsa serve`` on a free port; its output goes to ``<data_dir>.log``."""
    log_path = data_dir + ".log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli.main", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", data_dir], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            m = re.search(r"samsa listening on ([\d.]+):(\d+)", f.read())
        if m:
            return proc, f"{m.group(1)}:{m.group(2)}"
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"broker did not start, see {log_path}")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from samsa.client import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({name: partitions}, exist_ok=True)


def timed(fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - start)


# ---- producers --------------------------------------------------------------------------


def produce_samsa(bootstrap: str, topic: str, n: int) -> int:
    from samsa.client import Producer

    p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=65536)
    send = p.send
    for _ in range(n):
        send(topic, VALUE)
    assert p.flush(120) == 0
    p.close()
    return n


def produce_kafka_python(bootstrap: str, topic: str, n: int) -> int:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=65536)
    send = p.send
    for _ in range(n):
        send(topic, VALUE)
    p.flush(120)
    p.close()
    return n


def produce_confluent(bootstrap: str, topic: str, n: int) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                  "batch.size": 65536, "queue.buffering.max.messages": 2_000_000})
    produce = p.produce
    for i in range(n):
        try:
            produce(topic, VALUE)
        except BufferError:
            p.poll(0.01)
            produce(topic, VALUE)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return n


# ---- consumers --------------------------------------------------------------------------


def consume_samsa(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from samsa import TopicPartition
    from samsa.client import Consumer

    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                 max_poll_records=10000)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = 0
    while got < n:
        got += len(c.poll(1000))
    c.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      max_poll_records=10000, enable_auto_commit=False)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = 0
    while got < n:
        for records in c.poll(1000).values():
            got += len(records)
    c.close()
    return got


def consume_confluent(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    while got < n:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    c.close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bootstrap")
    args = ap.parse_args()
    n, parts = args.records, args.partitions
    proc = None
    tmp = tempfile.TemporaryDirectory()
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap = start_broker(os.path.join(tmp.name, "data"))
    run = f"{int(time.time())}"
    try:
        produced: list[Result] = []
        for name, fn in [("samsa", produce_samsa), ("kafka-python", produce_kafka_python),
                         ("confluent-kafka", produce_confluent)]:
            topic = f"bench-{name}-{run}"
            create_topic(bootstrap, topic, parts)
            rate = timed(lambda fn=fn, topic=topic: fn(bootstrap, topic, n))
            produced.append((name, topic, rate))
            print(f"produce  {name:16s} {rate:12,.0f} records/s", flush=True)
        source = produced[-1][1]  # every consumer reads the same (librdkafka-written) data
        consumed: list[Result] = []
        for name, cfn in [("samsa", consume_samsa), ("kafka-python", consume_kafka_python),
                          ("confluent-kafka", consume_confluent)]:
            rate = timed(lambda cfn=cfn: cfn(bootstrap, source, n, parts))
            consumed.append((name, source, rate))
            print(f"consume  {name:16s} {rate:12,.0f} records/s", flush=True)
        print(f"\n{n:,} records of {len(VALUE)} B, {parts} partitions, one samsa broker")
        for what, results in (("produce", produced), ("consume", consumed)):
            rates = {name: rate for name, _, rate in results}
            print(f"{what}: samsa/kafka-python = {rates['samsa'] / rates['kafka-python']:.2f}x,"
                  f" samsa/confluent-kafka = {rates['samsa'] / rates['confluent-kafka']:.2f}x")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        tmp.cleanup()


if __name__ == "__main__":
    main()
