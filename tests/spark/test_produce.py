"""The writer's bulk idempotent producer against the broker (no Spark session)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from samsa import Admin, TopicPartition
from samsa.client.errors import KafkaConnectionError
from samsa.client.future import Future
from samsa.client.net import ApiKey
from samsa.client.partitioner import partition_for_key
from samsa.spark import batches
from samsa.spark.produce import BulkProducer
from tests.brokerproc import BrokerProcess
from tests.spark.conftest import batch, create_topic, unique

pytestmark = pytest.mark.spark

# The C encoder (when built) and the fallback to the client's encoder.
encoders = pytest.mark.parametrize("native", [
    pytest.param(True, marks=pytest.mark.skipif(not batches.NATIVE,
                                                 reason="C extension not built")),
    False])


@pytest.fixture
def encoder(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not native:
        monkeypatch.setattr(batches, "_native", None)


def _end(bootstrap: str, tp: TopicPartition) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({tp: "latest"})[tp][0]


@encoders
@pytest.mark.usefixtures("encoder")
def test_lost_acknowledgement_is_resent_without_duplicates(broker: BrokerProcess,
                                                           native: bool) -> None:
    topic = create_topic(broker.bootstrap, unique("idem"), 1)
    with BulkProducer(broker.bootstrap, batch_size=200) as p:
        assert p.producer_id >= 0
        real = p.net.send
        lost: list[int] = []

        def lose_first_ack(dest: Any, api: int, body: Any, **kw: Any) -> Future[Any]:
            fut = real(dest, api, body, **kw)
            if api == ApiKey.PRODUCE and not lost:
                lost.append(1)
                fut.result(10)  # stored by the broker, but the producer never hears of it
                failed: Future[Any] = Future()
                failed.failure(KafkaConnectionError("connection lost"))
                return failed
            return fut

        p.net.send = lose_first_ack  # type: ignore[method-assign]
        n = 30
        p.send_columns(topic, None, pa.array([b"%d" % i for i in range(n)]),
                       pa.array([0] * n, pa.int32()), None)
        p.flush()
        assert lost and p.records_sent == n
    assert _end(broker.bootstrap, TopicPartition(topic, 0)) == n


def test_partitioning_matches_the_client(spark: Any, broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("keys"), 4)
    keys = [b"user-%d" % i for i in range(40)]
    with BulkProducer(broker.bootstrap) as p:
        p.send_columns(topic, pa.array(keys), pa.array([b"v"] * 40), None, None)
        p.send_columns(topic, None, pa.array([b"u"] * 40), None, None)
        p.flush()
    rows = batch(spark, broker, subscribe=topic).collect()
    keyed = [(r.key, r.partition) for r in rows if r.key is not None]
    assert sorted(keyed) == sorted((k, partition_for_key(k, 4)) for k in keys)
    assert len([r for r in rows if r.key is None]) == 40


@encoders
@pytest.mark.usefixtures("encoder")
def test_large_batches(broker: BrokerProcess, native: bool) -> None:
    """Requests of several hundred KiB (the writer's 256 KiB batches, many partitions)."""
    topic = create_topic(broker.bootstrap, unique("large"), 2)
    n = 1200
    with BulkProducer(broker.bootstrap, delivery_timeout_ms=15000) as p:
        p.send_columns(topic, None, pa.array([b"%04d" % i + b"x" * 996 for i in range(n)]),
                       pa.array([i % 2 for i in range(n)], pa.int32()), None)
        p.flush()
        assert p.records_sent == n
    assert _end(broker.bootstrap, TopicPartition(topic, 0)) == n // 2
    assert _end(broker.bootstrap, TopicPartition(topic, 1)) == n // 2


def test_sequences_are_per_partition_and_wrap() -> None:
    from samsa.client.producer import Sequences

    seq = Sequences()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert [seq.take(a, 5), seq.take(a, 3), seq.take(b, 2)] == [0, 5, 0]
    seq.take(b, 2**31 - 3)
    assert seq.take(b, 4) == 2**31 - 1 and seq.take(b, 1) == 3
