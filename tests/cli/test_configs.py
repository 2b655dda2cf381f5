"""``samsa configs`` and ``samsa topics alter-config`` against a broker."""

from __future__ import annotations

from samsa.client import Admin
from tests.cli.conftest import CLI, parse_table, unique


def test_topic_alter_config_and_describe(cli: CLI, admin: Admin) -> None:
    name = unique("cfg")
    admin.create_topics({name: 1}, configs={name: {"segment.ms": "3600000"}})
    r = cli("topics", "alter-config", name, "--set", "retention.ms=60000",
            "--set", "cleanup.policy=compact,delete", "--delete", "segment.ms")
    assert r.rc == 0, r.err
    assert f"Completed updating config for topic {name}." in r.out
    configs = admin.describe_configs("topic", name)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("60000", "topic")
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["segment.ms"].source == "default"

    rows = parse_table(cli("configs", "describe", "--topic", name).out)
    assert {row["CONFIG"]: (row["VALUE"], row["SOURCE"]) for row in rows} == {
        "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG")}
    everything = cli("configs", "describe", "--topic", name, "--all", "-o", "json").json()
    by_name = {c["name"]: c for c in everything}
    assert by_name["segment.ms"]["source"] == "DEFAULT_CONFIG"
    assert by_name["retention.ms"]["synonyms"][0] == {
        "name": "retention.ms", "value": "60000", "source": "DYNAMIC_TOPIC_CONFIG"}

    r = cli("configs", "alter", "--topic", name, "--add-config",
            "max.message.bytes=5000,cleanup.policy=[compact]", "--delete-config", "retention.ms",
            "-o", "json")
    assert r.rc == 0, r.err
    assert r.json()["set"] == {"max.message.bytes": "5000", "cleanup.policy": "compact"}
    configs = admin.describe_configs("topic", name)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].source == "default"

    r = cli("configs", "alter", "--topic", name, "--add-config", "retention.ms=1",
            "--validate-only")
    assert r.rc == 0 and "nothing was changed" in r.out
    assert admin.describe_configs("topic", name)["retention.ms"].source == "default"


def test_broker_and_group_configs(cli: CLI, admin: Admin) -> None:
    r = cli("configs", "alter", "--broker", "0", "--add-config",
            "log.retention.bytes=1000000000000")
    assert r.rc == 0, r.err
    try:
        rows = parse_table(cli("configs", "describe", "--broker", "0").out)
        assert {row["CONFIG"]: row["SOURCE"] for row in rows}["log.retention.bytes"] == \
            "DYNAMIC_BROKER_CONFIG"
    finally:
        assert cli("configs", "alter", "--broker", "0", "--delete-config",
                   "log.retention.bytes").rc == 0
    assert admin.describe_configs("broker", "0")["log.retention.bytes"].source == "default"
    r = cli("configs", "describe", "--broker-defaults")
    assert r.rc == 0 and "No dynamic configs for the default broker." in r.out

    group = unique("grp")
    r = cli("configs", "alter", "--group", group, "--add-config",
            "consumer.session.timeout.ms=50000")
    assert r.rc == 0, r.err
    configs = cli("configs", "describe", "--group", group, "--all", "-o", "json").json()
    assert {c["name"]: (c["value"], c["source"]) for c in configs} == {
        "consumer.assignment.interval.ms": ("1000", "DEFAULT_CONFIG"),
        "consumer.assignor.offload.enable": ("true", "DEFAULT_CONFIG"),
        "consumer.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG"),
        "consumer.session.timeout.ms": ("50000", "GROUP_CONFIG"),
        "errors.deadletterqueue.topic.name": ("", "DEFAULT_CONFIG"),
        "share.auto.offset.reset": ("latest", "DEFAULT_CONFIG"),
        "share.isolation.level": ("read_uncommitted", "DEFAULT_CONFIG"),
        "share.delivery.count.limit": ("5", "DEFAULT_CONFIG"),
        "share.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG"),
        "share.record.lock.duration.ms": ("30000", "DEFAULT_CONFIG"),
        "share.session.timeout.ms": ("45000", "DEFAULT_CONFIG"),
        "share.partition.max.record.locks": ("2000", "DEFAULT_CONFIG"),
        "share.renew.acknowledge.enable": ("true", "DEFAULT_CONFIG")}


def test_config_errors(cli: CLI, admin: Admin) -> None:
    name = unique("cfgerr")
    admin.create_topics({name: 1})
    r = cli("topics", "alter-config", name, "--set", "retention.ms=soon")
    assert r.rc == 1 and "invalid_config" in r.err and "retention.ms" in r.err
    assert r.err.count("\n") == 1
    r = cli("topics", "alter-config", name, "--set", "retention.ms")
    assert r.rc == 2 and "KEY=VALUE" in r.err
    r = cli("topics", "alter-config", name)
    assert r.rc == 2 and "nothing to change" in r.err
    r = cli("topics", "alter-config", name, "--set", "a=1", "--delete", "a")
    assert r.rc == 2 and "set and deleted at once" in r.err
    r = cli("topics", "alter-config", unique("missing"), "--set", "retention.ms=1")
    assert r.rc == 1 and "unknown_topic_or_partition" in r.err
    r = cli("configs", "alter", "--broker", "0", "--add-config", "num.partitions=3")
    assert r.rc == 1 and "invalid_request" in r.err and "dynamically" in r.err
    r = cli("configs", "alter", "--broker", "zero", "--add-config", "log.retention.ms=1")
    assert r.rc == 2 and "node id" in r.err
    r = cli("configs", "alter", "--group", unique("g"), "--add-config",
            "consumer.session.timeout.ms=10")
    assert r.rc == 1 and "invalid_config" in r.err
    r = cli("configs", "describe", "--topic", unique("missing"))
    assert r.rc == 1 and "unknown_topic_or_partition" in r.err
    r = cli("configs", "describe")
    assert r.rc == 2
