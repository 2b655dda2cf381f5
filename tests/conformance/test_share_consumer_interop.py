"""``samsa.ShareConsumer`` with other clients' share consumers in ONE share group on one
topic, over TCP. With confluent-kafka's ``ShareConsumer`` (librdkafka): three members for
two partitions; samsa's member releases what it gets on the first delivery (explicit
mode), librdkafka's accept (implicit mode); every record ends up accepted exactly once,
the released ones after a second delivery (to either client), and both kinds of member get
records. With Apache Kafka's Java ``KafkaShareConsumer`` 4.3: both in implicit mode, each
record delivered once, both get records."""

from __future__ import annotations

import functools
import time
from collections import Counter

import pytest

from samsa import AcknowledgeType, ShareConsumer
from tests.brokerproc import BrokerProcess
from tests.client.test_share_consumer import settle
from tests.conformance.groupkit import create_topic, produce, unique, wait_until
from tests.conformance.javakit import JavaKit
from tests.conformance.sharekit import set_group_configs, share_consumer

pytestmark = pytest.mark.conformance


def test_samsa_and_librdkafka_members_share_a_topic(share_broker: BrokerProcess) -> None:
    topic, group = unique("si"), unique("sig")
    create_topic(share_broker.bootstrap, topic, 2)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    samsa_member = ShareConsumer(topic, bootstrap_servers=share_broker.bootstrap,
                                 group_id=group, share_acknowledgement_mode="explicit",
                                 max_poll_records=10)
    rdkafka = [share_consumer(share_broker.bootstrap, group, [topic], f"rd{i}",
                              **{"max.poll.records": "10"}) for i in range(2)]
    released: set[bytes] = set()
    accepted: Counter[bytes] = Counter()
    by_samsa: list[tuple[bytes, int]] = []
    try:
        settle(share_broker, group, 3, [functools.partial(samsa_member.poll, 50)] +
               [functools.partial(s.poll, 0.05) for s in rdkafka])
        # batches of 5: whole batches are acquired (KIP-1206's batch-optimized mode)
        values = produce(share_broker.bootstrap, topic, 2, 40, **{"batch.num.messages": 5})
        deadline = time.monotonic() + 60
        while set(accepted) < values:
            assert time.monotonic() < deadline, len(values - set(accepted))
            for r in samsa_member.poll(100):
                assert r.value is not None
                by_samsa.append((r.value, r.delivery_count))
                if r.delivery_count == 1:
                    samsa_member.acknowledge(r, AcknowledgeType.RELEASE)
                    released.add(r.value)
                else:
                    samsa_member.acknowledge(r, AcknowledgeType.ACCEPT)
                    accepted[r.value] += 1
            for s in rdkafka:
                for m in s.poll(0.1):  # implicit: accepted by the next poll
                    assert m.delivery_count() == (2 if m.value() in released else 1)
                    accepted[m.value()] += 1
        for _ in range(10):  # nothing accepted comes back
            assert samsa_member.poll(100) == []
            for s in rdkafka:
                assert s.poll(0.1) == []
        assert set(accepted) == values and max(accepted.values()) == 1
        assert by_samsa and released and all(s.got for s in rdkafka)
        assert {n for _, n in by_samsa} <= {1, 2}
    finally:
        samsa_member.close()
        for s in rdkafka:
            s.close()


@pytest.mark.slow
def test_samsa_and_java_members_share_a_topic(share_broker: BrokerProcess,
                                              java: JavaKit) -> None:
    topic, group = unique("sj"), unique("sjg")
    create_topic(share_broker.bootstrap, topic, 2)
    set_group_configs(share_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    samsa_member = ShareConsumer(topic, bootstrap_servers=share_broker.bootstrap,
                                 group_id=group, max_poll_records=5)
    jvm = java.start("ShareMember", share_broker.bootstrap, group, topic, "client.id=j",
                     "max.poll.records=5", "reconnect.backoff.max.ms=200",
                     "retry.backoff.max.ms=300", name="j")
    got: Counter[str] = Counter()

    def java_values() -> Counter[str]:
        return Counter(r[2] for e in jvm.of("records") for r in e["records"])

    try:
        settle(share_broker, group, 2, [functools.partial(samsa_member.poll, 100)])
        # batches of 5: whole batches are acquired (KIP-1206's batch-optimized mode)
        values = {v.decode() for v in produce(share_broker.bootstrap, topic, 2, 40,
                                              **{"batch.num.messages": 5})}

        def everything() -> bool:
            for r in samsa_member.poll(100):
                assert r.value is not None and r.delivery_count == 1
                got[r.value.decode()] += 1
            return set(got + java_values()) >= values

        wait_until(everything, timeout=60, step=0, what="every record")
        for _ in range(10):
            assert samsa_member.poll(100) == []
        assert jvm.close() == 0
        counts = got + java_values()
        assert set(counts) == values and max(counts.values()) == 1
        assert got and java_values(), (len(got), len(java_values()))
        assert not jvm.of("error")
    finally:
        samsa_member.close()
