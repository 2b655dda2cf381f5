"""Multi-threaded processing, both designs of Kafka's consumer documentation.

1. One consumer per thread (:class:`ConsumerRunner`): each thread owns a consumer; another
   thread stops it with ``wakeup()``, the consumer's only thread-safe method.
2. One consumer feeding a worker pool (:func:`run_worker_pool`): records are handed to a
   worker chosen by hashing their partition, so each partition is processed in order by one
   worker; the consumer commits only offsets the workers have finished.

    python examples/consumer_threads.py --topic events --threads 3
"""

from __future__ import annotations

import argparse
import queue
import threading
from collections.abc import Callable

import samsa
from samsa import TopicPartition
from samsa.client import ConsumerRecord, WakeupError


class ConsumerRunner(threading.Thread):
    """Design 1: a thread that owns one consumer; ``shutdown()`` from any thread."""

    def __init__(self, bootstrap: str, topic: str, group: str,
                 handle: Callable[[ConsumerRecord], None]) -> None:
        super().__init__(daemon=True)
        self.consumer = samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                                       auto_offset_reset="earliest")
        self.topic = topic
        self.handle = handle
        self.closed = threading.Event()

    def run(self) -> None:
        try:
            self.consumer.subscribe([self.topic])
            while not self.closed.is_set():
                for record in self.consumer.poll(timeout_ms=10_000):
                    self.handle(record)
        except WakeupError:
            if not self.closed.is_set():  # not a shutdown: a real problem
                raise
        finally:
            self.consumer.close()

    def shutdown(self) -> None:
        self.closed.set()
        self.consumer.wakeup()


def run_worker_pool(bootstrap: str, topic: str, group: str, workers: int, expected: int,
                    handle: Callable[[ConsumerRecord], None]) -> int:
    """Design 2: one consumer, ``workers`` threads; returns the records processed."""
    queues: list[queue.Queue[ConsumerRecord | None]] = [queue.Queue() for _ in range(workers)]
    done: dict[TopicPartition, int] = {}
    done_lock = threading.Lock()
    count = [0]

    def work(q: queue.Queue[ConsumerRecord | None]) -> None:
        while (record := q.get()) is not None:
            handle(record)
            with done_lock:
                done[TopicPartition(record.topic, record.partition)] = record.offset + 1
                count[0] += 1

    threads = [threading.Thread(target=work, args=(q,), daemon=True) for q in queues]
    for t in threads:
        t.start()
    with samsa.Consumer(bootstrap_servers=bootstrap, group_id=group,
                        enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        dispatched = 0
        while dispatched < expected:
            for r in consumer.poll(timeout_ms=200):
                queues[hash((r.topic, r.partition)) % workers].put(r)
                dispatched += 1
            with done_lock:
                finished = dict(done)
            if finished:
                consumer.commit_async(finished)
        for q in queues:
            q.put(None)
        for t in threads:
            t.join()
        consumer.commit(done)
    return count[0]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--threads", type=int, default=3)
    a = ap.parse_args()
    runners = [ConsumerRunner(a.bootstrap, a.topic, "threads-example", print)
               for _ in range(a.threads)]
    for r in runners:
        r.start()
    try:
        for r in runners:
            r.join()
    except KeyboardInterrupt:
        for r in runners:
            r.shutdown()
