"""``samsa transactions list | describe`` (and ``samsa.Admin.list_transactions`` /
``describe_transactions``) against a broker, with librdkafka's transactional producers."""

from __future__ import annotations

from confluent_kafka import Producer

from samsa.client import Admin
from samsa.client.errors import KafkaError
from tests.brokerproc import BrokerProcess
from tests.cli.conftest import CLI, make_topic, parse_table, unique


def test_list_and_describe(cli: CLI, admin: Admin, broker: BrokerProcess) -> None:
    topic = make_topic(admin, 2)
    busy, idle = unique("busy"), unique("idle")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": busy})
    p.init_transactions(15)
    q = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": idle})
    q.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    p.flush(15)
    try:
        listed = {t.transactional_id: t.state for t in admin.list_transactions()}
        assert listed[busy] == "Ongoing" and listed[idle] == "Empty"
        assert [t.transactional_id for t in admin.list_transactions(["Ongoing"])
                if t.transactional_id in (busy, idle)] == [busy]
        r = cli("transactions", "list", "--state", "Ongoing")
        assert r.rc == 0, r.err
        assert {"TRANSACTIONAL ID": busy, "PRODUCER ID": str(admin.describe_transactions(
            [busy])[busy].producer_id), "STATE": "Ongoing"} in parse_table(r.out)
        r = cli("transactions", "describe", busy, "-o", "json")
        assert r.rc == 0, r.err
        (row,) = r.json()
        assert (row["state"], row["epoch"], row["timeout_ms"], row["partitions"]) == (
            "Ongoing", 0, 60000, f"{topic}-1")
        assert row["start_ms"] > 0
        described = admin.describe_transactions([idle])[idle]
        assert (described.state, described.start_ms, described.partitions) == (
            "Empty", None, ())
        r = cli("transactions", "describe", unique("nobody"))
        assert r.rc == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in r.err.upper().replace(" ", "_")
    finally:
        p.abort_transaction(15)
    try:
        admin.describe_transactions([unique("nobody")])
        raise AssertionError("an unknown id was described")
    except KafkaError as exc:
        assert exc.code == 105


def test_find_hanging_and_abort_refuse_incomplete_arguments(cli: CLI, admin: Admin) -> None:
    topic = make_topic(admin, 1)
    for argv, message in [
            (("find-hanging",), "needs --topic or --broker-id"),
            (("find-hanging", "--topic", topic, "--broker-id", "0"), "one of them"),
            (("find-hanging", "--broker-id", "0", "--partition", "0"), "--partition needs"),
            (("find-hanging", "--topic", topic, "--partition", "3"), "has no partition 3"),
            (("find-hanging", "--topic", unique("none")), "does not exist"),
            (("abort", "--topic", topic, "--partition", "0"), "needs --start-offset"),
            (("abort", "--topic", topic, "--partition", "0", "--producer-id", "1"),
             "all of --producer-id"),
            (("abort", "--topic", topic, "--partition", "0", "--start-offset", "0",
              "--producer-id", "1"), "not both"),
            (("abort", "--topic", topic, "--partition", "0", "--start-offset", "0"),
             "no open transaction starts at offset 0")]:
        r = cli("transactions", *argv)
        assert r.rc == 1 and message in r.err, (argv, r.err)
    r = cli("transactions", "find-hanging", "--broker-id", "0", "--max-transaction-timeout",
            "0", "-o", "json")
    assert r.rc == 0 and r.json() == [], r.err
    r = cli("transactions", "find-hanging", "--topic", "__consumer_offsets", "--partition",
            "0", "-o", "json")  # an internal topic may hold a hanging transaction too
    assert r.rc == 0 and r.json() == [], r.err
