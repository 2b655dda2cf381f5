"""samsa.Producer: key partitioning like librdkafka's murmur2_random, idempotent retries."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer as CkProducer
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client import Consumer, KafkaError, Producer, RecordMetadata
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.proxy import Delay, Drop, FaultProxy, error_answer


def consume_all(bootstrap: str, topic: str, partitions: int, n: int) -> list:
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        out: list = []
        for _ in range(100):
            out += c.poll(200)
            if len(out) >= n:
                break
        out += c.poll(300)  # anything extra (duplicates) shows up here
        return out


def test_key_partitioning_matches_librdkafka_murmur2(broker: BrokerProcess,
                                                     topic: Callable[[int], str]) -> None:
    t = topic(7)
    keys = [b"user-%d" % i for i in range(200)] + [b"", b"x", "ünïcode".encode()]
    ck = CkProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    delivered: dict[bytes, int] = {}

    def on_delivery(err: object, msg: object) -> None:
        assert err is None
        delivered[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    for k in keys:
        ck.produce(t, key=k, value=b"v", on_delivery=on_delivery)
    assert ck.flush(10) == 0
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        futures = {k: p.send(t, key=k, value=b"v") for k in keys}
        p.flush(10)
        ours = {k: f.result(5).partition for k, f in futures.items()}
    assert ours == delivered
    assert len(set(ours.values())) == 7


def test_null_keys_stick_to_a_partition_per_batch(broker: BrokerProcess,
                                                  topic: Callable[[int], str]) -> None:
    t = topic(4)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1000, batch_size=1_000_000) as p:
        futures = [p.send(t, value=b"x") for _ in range(50)]
        p.flush(10)
    assert len({f.result(1).partition for f in futures}) == 1


def test_futures_callbacks_and_offsets(broker: BrokerProcess,
                                       topic: Callable[[int], str]) -> None:
    t = topic(1)
    seen: list[tuple[object, RecordMetadata | None]] = []
    with Producer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=0) as p:
        futs = [p.send(t, value=b"%d" % i, on_delivery=lambda e, m: seen.append((e, m)))
                for i in range(20)]
        assert p.flush(10) == 0
        assert [f.result(1).offset for f in futs] == list(range(20))
        with pytest.raises(KafkaError):
            p.send(t, value=b"x", partition=5)
    assert len(seen) == 20 and all(e is None for e, _ in seen)


def test_bad_records_fail_send_and_leave_the_producer_working(
        broker: BrokerProcess, topic: Callable[[int], str]) -> None:
    t = topic(1)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for bad in ({"value": 42}, {"value": b"v", "key": 7},
                    {"value": b"v", "headers": [("h", "text")]},
                    {"value": b"v", "headers": [b"no-pair"]}):
            with pytest.raises(TypeError):
                p.send(t, **bad)  # type: ignore[arg-type]
        fut = p.send(t, value=b"ok", headers=[["h", b"x"]])  # type: ignore[list-item]
        assert p.flush(10) == 0
        assert fut.result(1).offset == 0
    (record,) = consume_all(broker.bootstrap, t, 1, 1)
    assert record.value == b"ok" and list(record.headers) == [("h", b"x")]


def test_acks_zero_delivers(broker: BrokerProcess, topic: Callable[[int], str]) -> None:
    t = topic(1)
    with Producer(bootstrap_servers=broker.bootstrap, acks=0, enable_idempotence=False) as p:
        for i in range(30):
            p.send(t, value=b"%d" % i)
        assert p.flush(10) == 0
    assert len(consume_all(broker.bootstrap, t, 1, 30)) == 30


def test_idempotent_retry_after_lost_response_does_not_duplicate(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    proc, proxy = proxied
    proxy.inject(ApiKey.PRODUCE, Drop())  # the first Produce is applied, its answer lost
    bootstrap = proxy.address
    with Producer(bootstrap_servers=bootstrap, linger_ms=0, retry_backoff_ms=50,
                  request_timeout_ms=5000) as p:
        futures = [p.send("idem", value=b"%d" % i, partition=0) for i in range(50)]
        assert p.flush(30) == 0
        offsets = [f.result(1).offset for f in futures]
    assert proxy.fired == [(ApiKey.PRODUCE, Drop())], "one Produce response must be lost"
    records = consume_all(proc.bootstrap, "idem", 1, 50)
    assert [r.value for r in records] == [b"%d" % i for i in range(50)]
    assert [o for o in offsets if o >= 0] == sorted(o for o in offsets if o >= 0)


@pytest.mark.parametrize("fault", ["error", "lost response"])
def test_idempotent_pipeline_keeps_order_when_a_request_mid_pipeline_fails(
        proxied: tuple[BrokerProcess, FaultProxy], fault: str) -> None:
    """Up to five Produce requests in flight on one connection: the first answer is held
    back, so more requests follow it; the third then fails. "error": it is answered with a
    retriable error without reaching the broker, so the fourth and fifth arrive out of
    sequence. "lost response": it is applied but the connection closes instead of its
    answer, so it and the requests behind it are retried. Either way every record lands
    once, in order."""
    proc, proxy = proxied
    third = (error_answer(ErrorCode.not_leader_or_follower) if fault == "error" else Drop())
    proxy.inject(ApiKey.PRODUCE, Delay(0.5), None, third)
    with Producer(bootstrap_servers=proxy.address, linger_ms=1000, batch_size=120,
                  retry_backoff_ms=50, request_timeout_ms=5000) as p:
        p.partitions_for("pipe")
        futures = [p.send("pipe", value=b"%d" % i, partition=0) for i in range(300)]
        assert p.flush(30) == 0
        offsets = [f.result(1).offset for f in futures]
    assert proxy.pending(ApiKey.PRODUCE) == 0
    assert proxy.peak_owed >= 3, "the fault must hit a pipeline of requests"
    # 100 full batches of 3 records (61 + 3 x 19 bytes of the 120); retried: the failed
    # request and the few behind it, once each and in sequence order (a batch retried out
    # of order is refused again, request after request: ~200 requests)
    assert proxy.seen[ApiKey.PRODUCE] <= 100 + 8
    records = consume_all(proc.bootstrap, "pipe", 1, 300)
    assert [r.value for r in records] == [b"%d" % i for i in range(300)]
    known = [o for o in offsets if o >= 0]
    assert known == sorted(known) and len(set(known)) == len(known)


def test_non_idempotent_retry_duplicates_control(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    """Control for the test above: without idempotence the same fault duplicates."""
    proc, proxy = proxied
    proxy.inject(ApiKey.PRODUCE, Drop())
    bootstrap = proxy.address
    with Producer(bootstrap_servers=bootstrap, linger_ms=0, enable_idempotence=False,
                  max_in_flight_requests_per_connection=1, retry_backoff_ms=50) as p:
        for i in range(10):
            p.send("plain", value=b"%d" % i, partition=0)
        assert p.flush(30) == 0
    assert proxy.fired == [(ApiKey.PRODUCE, Drop())]
    records = consume_all(proc.bootstrap, "plain", 1, 11)
    assert len(records) > 10


def test_buffer_memory_bounds_queued_records(broker: BrokerProcess,
                                             topic: Callable[[int], str]) -> None:
    t = topic(2)
    limit = 20_000
    with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=limit, batch_size=4096,
                  linger_ms=20) as p:
        futures = []
        for i in range(3000):
            futures.append(p.send(t, value=b"x" * 100, key=b"%d" % i))
            assert p.buffered_bytes <= limit + 200
        assert p.flush(30) == 0
    assert all(f.succeeded() for f in futures)
    assert len(consume_all(broker.bootstrap, t, 2, 3000)) == 3000
