"""Apache Kafka's Java client 4.3 against the transaction coordinator, with transactions v2
(KIP-890: transaction.version 2, samsa's default) and v1 (the feature at 0): commits,
aborts and offsets sent to a transaction as the Java consumer (read_committed) and
librdkafka see them, and a second instance of the transactional.id fencing the first
mid-transaction. Under v2 every transaction ends with an epoch bump: its batches carry a
new epoch each time; under v1 they keep theirs. Its Admin lists and describes transactions
(KIP-664)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.javakit import JavaKit
from tests.conformance.test_transactions import (
    CONFIG,
    TIMEOUT_S,
    batches,
    committed,
    make_topic,
    producer,
    read_all,
)

pytestmark = [pytest.mark.conformance, pytest.mark.slow]


@pytest.fixture(params=[2, 0], ids=["tv2", "tv1"])
def txn_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data",
                         {**CONFIG, "transaction.version": str(request.param)}).start()
    yield proc
    proc.kill()


def ok(reply: dict[str, object]) -> dict[str, object]:
    assert reply["ok"], reply
    return reply


def test_java_commit_abort_offsets_and_fencing(txn_broker: BrokerProcess,
                                               java: JavaKit) -> None:
    bootstrap = txn_broker.bootstrap
    topic, source = make_topic(bootstrap, 2), make_topic(bootstrap, 1)
    group, tid = "java-txn-group", "java-txn"
    a = java.start("Txn", bootstrap, tid, name="txn-a")
    a.wait_for(lambda e: e.get("event") == "ready", TIMEOUT_S)
    ok(a.request("begin"))
    for i in range(4):
        ok(a.request(f"send {topic} {i % 2} c1-{i}"))
    ok(a.request(f"offsets {group} {source} 0 7"))
    ok(a.request("commit"))
    ok(a.request("begin"))
    for i in range(4):
        ok(a.request(f"send {topic} {i % 2} aborted-{i}"))
    ok(a.request("abort"))
    ok(a.request("begin"))
    ok(a.request(f"send {topic} 0 c2"))
    ok(a.request(f"offsets {group} {source} 0 9"))
    ok(a.request("commit"))
    kept = sorted([f"c1-{i}" for i in range(4)] + ["c2"])
    data = [h for h in batches(bootstrap, topic, 0) if not h.is_control]
    epochs = [h.producer_epoch for h in data]
    tv2 = txn_broker.config["transaction.version"] == "2"
    # three transactions wrote to partition 0: v2 bumps the epoch at each end, v1 does not
    assert len(set(epochs)) == (3 if tv2 else 1), epochs
    assert all(h.is_transactional for h in data)
    # the Java consumer, read_committed, up to the last stable offsets
    events = java.run("ReadAll", bootstrap, topic, "isolation.level=read_committed")
    assert sorted(e["value"] for e in events if e["event"] == "record") == kept
    assert sorted(read_all(bootstrap, topic, 2, "read_committed", expect=5)) == kept
    assert committed(bootstrap, group, source) == 9
    # a second instance fences the first, whose open transaction is aborted
    ok(a.request("begin"))
    ok(a.request(f"send {topic} 1 zombie"))
    ok(a.request(f"offsets {group} {source} 0 99"))
    b = java.start("Txn", bootstrap, tid, name="txn-b")
    b.wait_for(lambda e: e.get("event") == "ready", TIMEOUT_S)
    fenced = a.request("commit")
    assert not fenced["ok"] and "Fenced" in str(fenced["error"]), fenced
    ok(b.request("begin"))
    ok(b.request(f"send {topic} 1 live"))
    ok(b.request("commit"))
    events = java.run("ReadAll", bootstrap, topic, "isolation.level=read_committed")
    assert sorted(e["value"] for e in events if e["event"] == "record") == sorted(
        [*kept, "live"])
    assert committed(bootstrap, group, source) == 9


def test_java_admin_lists_and_describes_transactions(tmp_path: Path, java: JavaKit) -> None:
    """Admin.listTransactions / describeTransactions / describeProducers (KIP-664) while
    one transaction is open and another id is idle."""
    broker = BrokerProcess(tmp_path / "data", CONFIG).start()
    try:
        bootstrap = broker.bootstrap
        topic = make_topic(bootstrap, 2)
        producer(bootstrap, "admin-idle")
        busy = producer(bootstrap, "admin-busy")
        busy.begin_transaction()
        busy.produce(topic, value="x", partition=1)
        busy.produce(topic, value="y", partition=0)
        busy.flush(TIMEOUT_S)
        admin = java.start("AdminDriver", bootstrap)
        try:
            listed = ok(admin.request("list-transactions"))["transactions"]
            described = ok(admin.request(
                "describe-transactions admin-busy admin-idle"))["transactions"]
            producers = ok(admin.request(f"describe-producers {topic}:1"))["producers"]
        finally:
            admin.close()
        assert sorted((t["id"], t["state"]) for t in listed) == [  # type: ignore[union-attr]
            ("admin-busy", "Ongoing"), ("admin-idle", "Empty")]
        assert described["admin-busy"] == {  # type: ignore[index]
            "state": "Ongoing", "producer_id": described["admin-busy"]["producer_id"],  # type: ignore[index]
            "epoch": 0, "timeout_ms": 60000, "started": True,
            "partitions": [f"{topic}:0", f"{topic}:1"]}
        assert described["admin-idle"]["state"] == "Empty"  # type: ignore[index]
        assert described["admin-idle"]["started"] is False  # type: ignore[index]
        assert described["admin-idle"]["partitions"] == []  # type: ignore[index]
        # DescribeProducers: the open transaction's first offset (a hanging one shows so)
        assert producers == [{  # type: ignore[comparison-overlap]
            "producer_id": described["admin-busy"]["producer_id"],  # type: ignore[index]
            "epoch": 0, "txn_start": 0}]
        busy.abort_transaction(TIMEOUT_S)
    finally:
        broker.kill()
