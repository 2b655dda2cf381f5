"""Broker throughput against the loopback ceiling, measured side by side in one run.

Starts a samsa broker, produces with confluent-kafka (1 KiB and 100 B records, acks=1 and
acks=all), consumes it back, and measures a plain Python socket sender/receiver pair on
the same loopback. Prints MB/s, records/s and ratios; also the broker's RSS with 1,000
idle partitions.

    .venv/bin/python benchmarks/throughput.py [--records-1k N] [--records-100 N]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.brokerproc import BrokerProcess

MB = 1_000_000


def loopback_ceiling(total_bytes: int, chunk: int = 1 << 16) -> float:
    """MB/s of one Python sender and one Python receiver over 127.0.0.1."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    received = 0

    def receive() -> None:
        nonlocal received
        conn, _ = srv.accept()
        buf = bytearray(1 << 20)
        while received < total_bytes:
            n = conn.recv_into(buf)
            if not n:
                break
            received += n
        conn.close()

    t = threading.Thread(target=receive)
    t.start()
    sender = socket.create_connection(("127.0.0.1", port))
    payload = b"x" * chunk
    start = time.perf_counter()
    sent = 0
    while sent < total_bytes:
        sender.sendall(payload)
        sent += chunk
    sender.close()
    t.join()
    elapsed = time.perf_counter() - start
    srv.close()
    return total_bytes / elapsed / MB


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> tuple[float, float]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576})
    value = b"v" * size
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    p.poll(0)
    assert p.flush(120) == 0
    elapsed = time.perf_counter() - start
    return n / elapsed, n * size / elapsed / MB


def consume(bootstrap: str, topic: str, partitions: int, n: int, size: int) -> tuple[float, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    eof: set[int] = set()
    start = time.perf_counter()
    while got < n:
        for m in c.consume(10_000, timeout=1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            got += 1
        if len(eof) == partitions and got >= n:
            break
    elapsed = time.perf_counter() - start
    c.close()
    return got / elapsed, got * size / elapsed / MB


def raw_fetch(bootstrap: str, topic: str, partitions: int, total_bytes: int) -> float:
    """MB/s of Fetch v12 over one connection, records counted but not decoded per record.

    This is the broker's side of fetching; the confluent-kafka figure above also pays
    librdkafka's and Python's per-message cost.
    """
    import datetime
    import struct

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from tests.wire import WireClient

    client = WireClient(bootstrap, timeout=30)
    offsets = [0] * partitions
    got = 0
    start = time.perf_counter()
    while got < total_bytes:
        req = FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
            max_bytes=64 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(FetchTopic(topic=topic, partitions=tuple(
                FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offsets[p],
                               last_fetched_epoch=-1, log_start_offset=-1,
                               partition_max_bytes=16 << 20) for p in range(partitions))),),
            forgotten_topics_data=(), rack_id="")
        response = client.call(1, 12, req)
        progressed = False
        for part in response.responses[0].partitions:
            data = part.records or b""
            pos = 0
            while pos + 27 <= len(data):  # walk batch headers only
                base, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > len(data):
                    break
                (delta,) = struct.unpack_from(">i", data, pos + 23)
                offsets[part.partition_index] = base + delta + 1
                pos += 12 + length
                progressed = True
            got += pos
        if not progressed:
            break
    elapsed = time.perf_counter() - start
    client.close()
    return got / elapsed / MB


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records-1k", type=int, default=300_000)
    ap.add_argument("--records-100", type=int, default=1_000_000)
    args = ap.parse_args()

    ceiling = loopback_ceiling(2_000_000_000)
    print(f"loopback ceiling (python socket pair): {ceiling:,.0f} MB/s")
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            topics = {"b1k-acks1": 4, "b1k-acksall": 4, "b100": 4}
            fs = admin.create_topics([NewTopic(t, num_partitions=n) for t, n in topics.items()])
            for f in fs.values():
                f.result(30)
            rows = []
            for topic, acks in (("b1k-acks1", "1"), ("b1k-acksall", "all")):
                rps, mbs = produce(broker.bootstrap, topic, args.records_1k, 1024, acks)
                rows.append((f"produce 1 KiB acks={acks}", rps, mbs, mbs / ceiling, 0.3))
            rps, mbs = consume(broker.bootstrap, "b1k-acks1", 4, args.records_1k, 1024)
            rows.append(("fetch 1 KiB (confluent)", rps, mbs, mbs / ceiling, 0.5))
            raw = raw_fetch(broker.bootstrap, "b1k-acks1", 4, args.records_1k * 1024)
            rows.append(("fetch 1 KiB (protocol)", raw * MB / 1024, raw, raw / ceiling, 0.5))
            rps, mbs = produce(broker.bootstrap, "b100", args.records_100, 100, "1")
            rows.append(("produce 100 B acks=1", rps, mbs, mbs / ceiling, None))
            rps, mbs = consume(broker.bootstrap, "b100", 4, args.records_100, 100)
            rows.append(("fetch 100 B (confluent)", rps, mbs, mbs / ceiling, None))
            print(f"{'case':<26}{'records/s':>14}{'MB/s':>10}{'x ceiling':>11}{'target':>9}")
            for name, rps, mbs, ratio, target in rows:
                tgt = f">={target}" if target else ""
                print(f"{name:<26}{rps:>14,.0f}{mbs:>10,.1f}{ratio:>11.3f}{tgt:>9}")
            print("target: produce 100 B >= 500,000 records/s")
        finally:
            broker.stop()

        idle = BrokerProcess(Path(tmp) / "idle").start()
        try:
            assert idle.proc is not None
            base = rss_mb(idle.proc.pid)
            admin = AdminClient({"bootstrap.servers": idle.bootstrap})
            fs = admin.create_topics([NewTopic(f"idle-{i}", num_partitions=10)
                                      for i in range(100)])
            for f in fs.values():
                f.result(60)
            time.sleep(1)
            print(f"broker RSS: {base:.1f} MB empty, {rss_mb(idle.proc.pid):.1f} MB with "
                  "1,000 idle partitions (target <= 150 MB)")
        finally:
            idle.stop()


if __name__ == "__main__":
    main()
