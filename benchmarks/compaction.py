"""Log compaction: cleaner throughput, and how long requests wait while it runs.

1. The cleaner alone: a 64 MB log of keyed 100 B records (10,000 keys) compacted in
   process by ``PartitionLog.compact``; prints MB/s.
2. Through a broker: ~50 MB of keyed records produced (acks=all) into a compacted topic
   with 8 MiB segments, then ApiVersions round trips are timed back to back, first with the
   broker idle and then while its housekeeping compacts the topic (the cleaner runs on a
   worker thread; the event loop keeps serving). Prints the latency percentiles of both
   windows, measured side by side in one run, and the topic's size before and after.

    .venv/bin/python benchmarks/compaction.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from tests.brokerproc import BrokerProcess
from tests.records import make_batch
from tests.wire import WireClient

from samsa.log import LogConfig, PartitionLog

MB = 1_000_000


def cleaner_alone(tmp: Path) -> tuple[float, float, float]:
    cfg = LogConfig.from_mapping({"cleanup.policy": "compact", "segment.bytes": str(16 << 20),
                                  "min.cleanable.dirty.ratio": "0.01"})
    log = PartitionLog.open(tmp / "cleaner", cfg, now_ms=0)
    n = 0
    while log.size_bytes < 64 << 20:
        recs = [(b"key-%d" % ((n + i) % 10_000), b"v" * 100) for i in range(100)]
        log.append(make_batch(recs, timestamp_ms=1000), now_ms=1000)
        n += 100
    log.flush(checkpoint=True)
    start = time.perf_counter()
    stats = log.compact(now_ms=10_000_000)
    elapsed = time.perf_counter() - start
    log.close()
    return stats.bytes_before / MB, stats.bytes_after / MB, elapsed


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def latencies(client: WireClient, seconds: float) -> list[float]:
    request = ApiVersionsRequest(client_software_name="bench", client_software_version="1")
    out = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t = time.perf_counter()
        client.call(18, 3, request)
        out.append((time.perf_counter() - t) * 1000)
        time.sleep(0.001)
    return out


def summary(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100)
    return f"{len(ms):6d} requests  p50 {q[49]:6.2f} ms  p99 {q[98]:7.2f} ms  max {max(ms):7.2f} ms"


def through_broker(tmp: Path) -> None:
    broker = BrokerProcess(tmp / "data", {"log.retention.check.interval.ms": "3000"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("compacted", 1, config={
            "cleanup.policy": "compact", "segment.bytes": str(8 << 20),
            "min.cleanable.dirty.ratio": "0.01"})])["compacted"].result(15)
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        value = b"v" * 100
        for i in range(400_000):
            while True:
                try:
                    p.produce("compacted", key=b"k%d" % (i % 1000), value=value)
                    break
                except BufferError:
                    p.poll(0.01)
        assert p.flush(60) == 0
        directory = broker.data_dir / "compacted-0"
        before = _size(directory)
        client = WireClient(broker.bootstrap, timeout=60)
        idle = latencies(client, 1.0)
        # The next housekeeping round (every 3 s) compacts; time requests until it is done.
        busy: list[float] = []
        deadline = time.monotonic() + 60
        while _size(directory) >= before and time.monotonic() < deadline:
            busy += latencies(client, 0.5)
        busy += latencies(client, 0.5)
        client.close()
        after = _size(directory)
        print(f"topic: {before / MB:.1f} MB of segments -> {after / MB:.1f} MB")
        print(f"ApiVersions, broker idle:        {summary(idle)}")
        print(f"ApiVersions, during compaction:  {summary(busy)}")
    finally:
        broker.stop()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before, after, elapsed = cleaner_alone(Path(tmp))
        print(f"cleaner alone: {before:.0f} MB -> {after:.1f} MB in {elapsed:.2f} s "
              f"({before / elapsed:.0f} MB/s)")
        through_broker(Path(tmp))


if __name__ == "__main__":
    main()
