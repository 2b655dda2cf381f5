"""samsa.Consumer with manual assignment against the samsa broker: fetch, seek, pause, wakeup."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from confluent_kafka import Producer as CkProducer

from samsa import TopicPartition
from samsa.client import (
    Consumer,
    NoOffsetForPartitionError,
    Producer,
    WakeupError,
)
from tests.brokerproc import BrokerProcess


def produce(bootstrap: str, topic: str, n: int, partition: int | None = None,
            **config: object) -> None:
    with Producer(bootstrap_servers=bootstrap, **config) as p:
        for i in range(n):
            p.send(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)


def drain(c: Consumer, n: int, rounds: int = 100) -> list:
    out: list = []
    for _ in range(rounds):
        out += c.poll(200)
        if len(out) >= n:
            break
    return out


def test_assign_reads_everything_in_order(broker: BrokerProcess,
                                          topic: Callable[[int], str]) -> None:
    t = topic(3)
    produce(broker.bootstrap, t, 300)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=50) as c:
        c.assign([TopicPartition(t, p) for p in range(3)])
        records = drain(c, 300)
        assert len(records) == 300
        assert all(len(batch) <= 50 for batch in [records[:50]])
        for p in range(3):
            offsets = [r.offset for r in records if r.partition == p]
            assert offsets == list(range(len(offsets)))
        assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(300))
        assert c.poll(100) == []


def test_max_poll_records_bounds_each_poll(broker: BrokerProcess,
                                           topic: Callable[[int], str]) -> None:
    t = topic(1)
    produce(broker.bootstrap, t, 100)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=7) as c:
        c.assign([TopicPartition(t, 0)])
        sizes = []
        total = 0
        while total < 100:
            got = c.poll(1000)
            assert got, "records expected"
            sizes.append(len(got))
            total += len(got)
        assert max(sizes) == 7


def test_latest_none_and_seek(broker: BrokerProcess, topic: Callable[[int], str]) -> None:
    t = topic(1)
    tp = TopicPartition(t, 0)
    produce(broker.bootstrap, t, 10)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:  # latest
        c.assign([tp])
        assert c.position(tp) == 10
        assert c.poll(200) == []
        c.seek(tp, 4)
        got = drain(c, 6)
        assert [r.offset for r in got] == list(range(4, 10))
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        c.seek_to_end()
        assert c.position(tp) == 10
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            c.poll(100)


def test_seek_discards_in_flight_data(broker: BrokerProcess,
                                      topic: Callable[[int], str]) -> None:
    t = topic(1)
    tp = TopicPartition(t, 0)
    produce(broker.bootstrap, t, 50)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=10) as c:
        c.assign([tp])
        first = c.poll(2000)
        assert [r.offset for r in first] == list(range(10))
        c.seek(tp, 0)  # buffered records 10.. must not come back
        again = c.poll(2000)
        assert again[0].offset == 0


def test_pause_and_resume(broker: BrokerProcess, topic: Callable[[int], str]) -> None:
    t = topic(2)
    a, b = TopicPartition(t, 0), TopicPartition(t, 1)
    produce(broker.bootstrap, t, 20, partition=0)
    produce(broker.bootstrap, t, 20, partition=1)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([a, b])
        c.pause(a)
        assert c.paused() == {a}
        got = drain(c, 20)
        assert {r.partition for r in got} == {1}
        assert c.poll(300) == []
        c.resume(a)
        assert c.paused() == set()
        got = drain(c, 20)
        assert {r.partition for r in got} == {0} and len(got) == 20


def test_wakeup_interrupts_blocked_poll(broker: BrokerProcess,
                                        topic: Callable[[int], str]) -> None:
    t = topic(1)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([TopicPartition(t, 0)])
        timer = threading.Timer(0.3, c.wakeup)
        timer.start()
        with pytest.raises(WakeupError):
            c.poll(30_000)
        timer.join()
        assert c.poll(10) == []  # the wakeup is consumed


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_reads_compressed_batches_from_librdkafka(broker: BrokerProcess,
                                                  topic: Callable[[int], str],
                                                  codec: str) -> None:
    t = topic(1)
    p = CkProducer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                    "linger.ms": 20})
    for i in range(200):
        p.produce(t, key=b"k%d" % i, value=b"value-%d" % i * 5, headers=[("i", b"%d" % i)],
                  timestamp=1_700_000_000_000 + i)
    assert p.flush(10) == 0
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(t, 0)])
        got = drain(c, 200)
    assert [r.value for r in got] == [b"value-%d" % i * 5 for i in range(200)]
    assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(200)]
    assert got[7].headers == [("i", b"7")]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_samsa_producer_compression_read_by_librdkafka(broker: BrokerProcess,
                                                       topic: Callable[[int], str],
                                                       codec: str) -> None:
    from confluent_kafka import Consumer as CkConsumer
    from confluent_kafka import TopicPartition as CkTP

    t = topic(1)
    produce(broker.bootstrap, t, 100, partition=0, compression_type=codec)
    c = CkConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                    "enable.auto.commit": False})
    try:
        c.assign([CkTP(t, 0, 0)])
        values = []
        for _ in range(50):
            for m in c.consume(100, 0.2):
                assert m.error() is None
                values.append(m.value())
            if len(values) >= 100:
                break
    finally:
        c.close()
    assert values == [b"v%d" % i for i in range(100)]


def test_offsets_lookups(broker: BrokerProcess, topic: Callable[[int], str]) -> None:
    t = topic(2)
    produce(broker.bootstrap, t, 10, partition=1)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        parts = [TopicPartition(t, 0), TopicPartition(t, 1)]
        assert c.beginning_offsets(parts) == dict.fromkeys(parts, 0)
        assert c.end_offsets(parts) == {parts[0]: 0, parts[1]: 10}
        assert c.partitions_for_topic(t) == {0, 1}


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_offset_out_of_range_follows_auto_offset_reset(broker: BrokerProcess,
                                                       topic: Callable[[int], str],
                                                       reset: str) -> None:
    from samsa.client import OffsetOutOfRangeError

    t = topic(1)
    tp = TopicPartition(t, 0)
    produce(broker.bootstrap, t, 10)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset=reset) as c:
        c.assign([tp])
        c.seek(tp, 1000)
        if reset == "none":
            with pytest.raises(OffsetOutOfRangeError):
                for _ in range(20):
                    c.poll(200)
            return
        if reset == "earliest":
            got = drain(c, 10, rounds=20)
            assert [r.offset for r in got] == list(range(10))
        else:
            for _ in range(20):
                assert c.poll(200) == []
                if c.position(tp) != 1000:
                    break
            assert c.position(tp) == 10
