"""The consumer usage patterns under examples/ (Kafka consumer design, examples 1-8)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from examples import (
    consumer_assign_partitions,
    consumer_autocommit,
    consumer_external_offsets,
    consumer_flow_control,
    consumer_manual_commit,
    consumer_rewind_group,
    consumer_seek_on_failure,
    consumer_threads,
)

from samsa import TopicPartition
from samsa.client import Admin, ConsumerRecord, Producer
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until

_groups = itertools.count()


@pytest.fixture
def group() -> str:
    return f"ex-{next(_groups)}"


def fill(broker: BrokerProcess, topic: str, n: int, partitions: int = 1,
         timestamp: Callable[[int], int] | None = None) -> None:
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(n):
            p.send(topic, value=b"%d" % i, partition=i % partitions,
                   timestamp_ms=None if timestamp is None else timestamp(i))


def test_example_4_specific_partitions(broker: BrokerProcess,
                                       topic: Callable[[int], str]) -> None:
    t = topic(3)
    fill(broker, t, 30, partitions=3)
    got = consumer_assign_partitions.run(broker.bootstrap, t, [0, 2])
    assert got == {0: [b"%d" % i for i in range(0, 30, 3)],
                   2: [b"%d" % i for i in range(2, 30, 3)]}


@pytest.mark.slow
def test_example_1_2_autocommit_resumes_after_restart(broker: BrokerProcess,
                                                      topic: Callable[[int], str],
                                                      group: str) -> None:
    t = topic(2)
    fill(broker, t, 100, partitions=2)
    first = consumer_autocommit.run(broker.bootstrap, t, group, max_records=100)
    assert len(first) == 100
    fill(broker, t, 10, partitions=2)
    second = consumer_autocommit.run(broker.bootstrap, t, group, max_records=100, idle_polls=10)
    assert len(second) == 10  # committed on close: nothing re-read


@pytest.mark.slow
def test_example_3_manual_commit_is_at_least_once(broker: BrokerProcess,
                                                  topic: Callable[[int], str], group: str,
                                                  tmp_path: Path) -> None:
    t = topic(1)
    fill(broker, t, 100)
    db = str(tmp_path / "db.sqlite")
    crashed = consumer_manual_commit.run(broker.bootstrap, t, group, db, batch=30,
                                         crash_before_commit=True)
    assert crashed == 30
    total = consumer_manual_commit.run(broker.bootstrap, t, group, db, batch=30,
                                       idle_polls=10)
    assert total == 100  # the uncommitted batch is delivered again
    import sqlite3

    rows = sqlite3.connect(db).execute("SELECT off FROM events").fetchall()
    assert len(rows) == 130 and {r[0] for r in rows} == set(range(100))


@pytest.mark.slow
def test_example_5_8_external_offsets_exactly_once(broker: BrokerProcess,
                                                   topic: Callable[[int], str], group: str,
                                                   tmp_path: Path) -> None:
    import sqlite3

    t = topic(2)
    fill(broker, t, 60, partitions=2)
    db = str(tmp_path / "sink.sqlite")
    assert consumer_external_offsets.run(broker.bootstrap, t, group, db, max_records=25) == 25
    assert consumer_external_offsets.run(broker.bootstrap, t, group, db, idle_polls=10) == 35
    rows = sqlite3.connect(db).execute("SELECT part, off FROM sink").fetchall()
    assert len(rows) == len(set(rows)) == 60
    # Example 8: rewinding through the external store re-processes everything.
    assert consumer_external_offsets.run(broker.bootstrap, t, group, db, idle_polls=10,
                                         rewind=True) == 60


@pytest.mark.slow
def test_example_6_seek_back_after_failure(broker: BrokerProcess,
                                           topic: Callable[[int], str], group: str) -> None:
    t = topic(2)
    fill(broker, t, 40, partitions=2)
    fail_once = {5, 17}

    def handle(r: ConsumerRecord) -> None:
        if int(r.value or b"0") in fail_once:
            fail_once.discard(int(r.value or b"0"))
            raise RuntimeError("transient failure")

    stats = consumer_seek_on_failure.run(broker.bootstrap, t, group, 40, handle,
                                         commit_interval=10)
    assert stats.failures == 2
    values = sorted(int(r.value or b"0") for r in stats.processed)
    assert values == list(range(40))  # every record once, failed ones retried


@pytest.mark.slow
def test_example_7_rewind_group(broker: BrokerProcess, topic: Callable[[int], str],
                                group: str) -> None:
    t = topic(2)
    fill(broker, t, 20, partitions=2, timestamp=lambda i: 1_000_000 + i * 1000)
    assert len(consumer_rewind_group.run(broker.bootstrap, t, group, rewind=False,
                                         max_records=20)) == 20
    assert consumer_rewind_group.run(broker.bootstrap, t, group, rewind=False,
                                     max_records=20, idle_polls=5) == []
    again = consumer_rewind_group.run(broker.bootstrap, t, group, rewind=True, max_records=20)
    assert len(again) == 20
    since = consumer_rewind_group.run(broker.bootstrap, t, group, rewind=True,
                                      rewind_to_ms=1_010_000, max_records=20, idle_polls=5)
    assert len(since) == 10


@pytest.mark.slow
def test_example_pause_resume_flow_control(broker: BrokerProcess, admin: Admin,
                                           topic: Callable[[int], str], group: str) -> None:
    left, right = topic(1), topic(1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(60):
            p.send(left, value=b"l", timestamp_ms=1_000_000 + i * 1000)
            p.send(right, value=b"r", timestamp_ms=1_000_000 + i * 1000)
    seen, pauses = consumer_flow_control.run(broker.bootstrap, left, right, group, 120,
                                             max_skew_ms=5000)
    assert len(seen) == 120 and pauses >= 1
    newest = {left: 0, right: 0}
    worst = 0
    for t, ts in seen:
        newest[t] = ts
        if min(newest.values()) > 0:
            worst = max(worst, abs(newest[left] - newest[right]))
    assert worst <= 5000 + 20 * 1000  # bounded by the skew plus one poll's worth


@pytest.mark.slow
def test_example_threads_one_consumer_per_thread(broker: BrokerProcess,
                                                 topic: Callable[[int], str],
                                                 group: str) -> None:
    t = topic(3)
    fill(broker, t, 90, partitions=3)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def handle(r: ConsumerRecord) -> None:
        with lock:
            seen.append((r.partition, r.offset))

    runners = [consumer_threads.ConsumerRunner(broker.bootstrap, t, group, handle)
               for _ in range(3)]
    for r in runners:
        r.start()
    wait_until(lambda: len(seen) >= 90, timeout=60)
    for r in runners:
        r.shutdown()
    for r in runners:
        r.join(30)
        assert not r.is_alive()
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 90


@pytest.mark.slow
def test_example_threads_worker_pool(broker: BrokerProcess, topic: Callable[[int], str],
                                     group: str) -> None:
    t = topic(4)
    fill(broker, t, 200, partitions=4)
    order: dict[int, list[int]] = {}
    lock = threading.Lock()

    def handle(r: ConsumerRecord) -> None:
        with lock:
            order.setdefault(r.partition, []).append(r.offset)

    assert consumer_threads.run_worker_pool(broker.bootstrap, t, group, 3, 200, handle) == 200
    assert all(offs == sorted(offs) for offs in order.values())  # per-partition order kept
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        committed = admin.list_consumer_group_offsets(group)
    assert sum(committed[TopicPartition(t, p)] for p in range(4)) == 200
