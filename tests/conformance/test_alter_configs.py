"""Configs changed on a live broker through confluent-kafka's AdminClient (KIP-339 and legacy
AlterConfigs): topics, the broker and groups, validate_only, errors, DescribeConfigs sources,
persistence across a restart, and changes that take effect at once."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
)

from samsa.client import Admin
from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.conformance

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _resource(kind: str, name: str, *ops: tuple[str, str | None, AlterConfigOpType]
              ) -> ConfigResource:
    return ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])


def _alter(admin: AdminClient, res: ConfigResource, validate_only: bool = False) -> None:
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(15)


def _error(admin: AdminClient, res: ConfigResource, legacy: bool = False) -> KafkaError:
    with pytest.raises(KafkaException) as exc:
        if legacy:
            admin.alter_configs([res])[res].result(15)
        else:
            _alter(admin, res)
    error: KafkaError = exc.value.args[0]
    return error


def _describe(admin: AdminClient, kind: str, name: str) -> dict[str, Any]:
    res = ConfigResource(kind, name)
    return dict(admin.describe_configs([res])[res].result(15))


def _create(admin: AdminClient, name: str, configs: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(name, 1, config=configs or {})])[name].result(15)


def test_incremental_alter_topic(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    name = _name("alter")
    _create(admin, name)

    _alter(admin, _resource("TOPIC", name, ("retention.ms", "3600000", SET),
                            ("cleanup.policy", "compact", APPEND)))
    configs = _describe(admin, "TOPIC", name)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert [s.name for s in configs["retention.ms"].synonyms.values()][:2] == [
        "retention.ms", "log.retention.ms"]
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    _alter(admin, _resource("TOPIC", name, ("retention.ms", None, DELETE),
                            ("cleanup.policy", "delete", SUBTRACT)))
    configs = _describe(admin, "TOPIC", name)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"

    _alter(admin, _resource("TOPIC", name, ("retention.ms", "1", SET)), validate_only=True)
    assert _describe(admin, "TOPIC", name)["retention.ms"].value == "604800000"


def test_topic_alter_errors(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    name = _name("bad")
    _create(admin, name, {"retention.ms": "1000"})
    cases = [
        (("retention.ms", "soon", SET), KafkaError.INVALID_CONFIG, "retention.ms"),
        (("retention.ms", "-5", SET), KafkaError.INVALID_CONFIG, "retention.ms"),
        (("no.such.config", "1", SET), KafkaError.INVALID_CONFIG, "no.such.config"),
        (("cleanup.policy", "forever", SET), KafkaError.INVALID_CONFIG, "cleanup.policy"),
        (("retention.ms", "5", APPEND), KafkaError.INVALID_CONFIG, "not LIST"),
    ]
    for op, code, fragment in cases:
        err = _error(admin, _resource("TOPIC", name, op))
        assert err.code() == code, (op, err)
        assert fragment in err.str(), (op, err)
    # Nothing of a refused change is applied, even the valid keys beside the bad one.
    err = _error(admin, _resource("TOPIC", name, ("segment.ms", "60000", SET),
                                  ("retention.ms", "soon", SET)))
    assert err.code() == KafkaError.INVALID_CONFIG
    configs = _describe(admin, "TOPIC", name)
    assert configs["retention.ms"].value == "1000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    missing = _name("missing")
    err = _error(admin, _resource("TOPIC", missing, ("retention.ms", "1000", SET)))
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    err = _error(admin, ConfigResource("TOPIC", missing, set_config={"retention.ms": "1"}),
                 legacy=True)
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert missing not in admin.list_topics(timeout=10).topics
    err = _error(admin, _resource("TOPIC", "bad/name", ("retention.ms", "1000", SET)))
    assert err.code() == KafkaError.TOPIC_EXCEPTION


def test_legacy_alter_replaces_all(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    name = _name("legacy")
    _create(admin, name, {"retention.ms": "1000", "segment.ms": "3600000"})
    res = ConfigResource("TOPIC", name, set_config={"cleanup.policy": "compact",
                                                    "max.message.bytes": "5000"})
    admin.alter_configs([res], validate_only=True)[res].result(15)
    assert _describe(admin, "TOPIC", name)["retention.ms"].value == "1000"
    admin.alter_configs([res])[res].result(15)
    configs = _describe(admin, "TOPIC", name)
    dynamic = {k for k, c in configs.items()
               if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert dynamic == {"cleanup.policy", "max.message.bytes"}
    assert configs["retention.ms"].value == "604800000"
    err = _error(admin, ConfigResource("TOPIC", name, set_config={"segment.ms": "x"}),
                 legacy=True)
    assert err.code() == KafkaError.INVALID_CONFIG
    assert _describe(admin, "TOPIC", name)["cleanup.policy"].value == "compact"


def test_group_configs(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    group = _name("group")
    configs = _describe(admin, "GROUP", group)
    assert {k: (c.value, c.source) for k, c in configs.items()} == {
        "consumer.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
        "consumer.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value),
        "consumer.assignment.interval.ms": ("1000", ConfigSource.DEFAULT_CONFIG.value),
        "consumer.assignor.offload.enable": ("true", ConfigSource.DEFAULT_CONFIG.value),
        "share.auto.offset.reset": ("latest", ConfigSource.DEFAULT_CONFIG.value),
        "share.isolation.level": ("read_uncommitted", ConfigSource.DEFAULT_CONFIG.value),
        "errors.deadletterqueue.topic.name": ("", ConfigSource.DEFAULT_CONFIG.value),
        "share.renew.acknowledge.enable": ("true", ConfigSource.DEFAULT_CONFIG.value),
        "share.delivery.count.limit": ("5", ConfigSource.DEFAULT_CONFIG.value),
        "share.partition.max.record.locks": ("2000", ConfigSource.DEFAULT_CONFIG.value),
        "share.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value),
        "share.record.lock.duration.ms": ("30000", ConfigSource.DEFAULT_CONFIG.value),
        "share.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value)}

    _alter(admin, _resource("GROUP", group, ("consumer.session.timeout.ms", "50000", SET),
                            ("consumer.heartbeat.interval.ms", "6000", SET)))
    configs = _describe(admin, "GROUP", group)
    assert configs["consumer.session.timeout.ms"].value == "50000"
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert [s.name for s in configs["consumer.session.timeout.ms"].synonyms.values()] == [
        "consumer.session.timeout.ms", "group.consumer.session.timeout.ms"]
    assert configs["consumer.heartbeat.interval.ms"].value == "6000"

    for op in [("consumer.session.timeout.ms", "1000", SET),       # below the broker's min
               ("consumer.session.timeout.ms", "99999999", SET),   # above its max
               ("consumer.heartbeat.interval.ms", "x", SET),
               ("consumer.heartbeat.interval.ms", "2000", SET),    # below the broker's min
               ("consumer.assignment.interval.ms", "16000", SET),  # above the broker's max
               ("consumer.assignment.interval.ms", "-1", SET),
               ("consumer.assignor.offload.enable", "maybe", SET),
               ("share.session.timeout.ms", "0", SET),
               ("share.auto.offset.reset", "sometimes", SET),
               ("share.isolation.level", "read_mostly", SET),
               ("share.delivery.count.limit", "1", SET),
               ("share.partition.max.record.locks", "99", SET),
               ("share.renew.acknowledge.enable", "1", SET),
               ("no.such.config", "1", SET)]:
        assert _error(admin, _resource("GROUP", group, op)).code() == KafkaError.INVALID_CONFIG
    _alter(admin, _resource("GROUP", group, ("consumer.heartbeat.interval.ms", "7000", SET)),
           validate_only=True)
    assert _describe(admin, "GROUP", group)["consumer.heartbeat.interval.ms"].value == "6000"

    _alter(admin, _resource("GROUP", group, ("consumer.assignment.interval.ms", "0", SET),
                            ("consumer.assignor.offload.enable", "false", SET)))
    configs = _describe(admin, "GROUP", group)
    assert (configs["consumer.assignment.interval.ms"].value,
            configs["consumer.assignor.offload.enable"].value) == ("0", "false")
    assert configs["consumer.assignor.offload.enable"].source == ConfigSource.GROUP_CONFIG.value
    _alter(admin, _resource("GROUP", group, ("share.auto.offset.reset", "by_duration:PT1H", SET),
                            ("share.delivery.count.limit", "7", SET)))
    configs = _describe(admin, "GROUP", group)
    assert (configs["share.auto.offset.reset"].value, configs["share.delivery.count.limit"].value,
            configs["share.auto.offset.reset"].source) == (
                "by_duration:PT1H", "7", ConfigSource.GROUP_CONFIG.value)

    res = ConfigResource("GROUP", group, set_config={"consumer.heartbeat.interval.ms": "8000"})
    admin.alter_configs([res])[res].result(15)
    configs = _describe(admin, "GROUP", group)
    assert configs["consumer.heartbeat.interval.ms"].value == "8000"
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_share_group_configs_within_the_broker_bounds(broker: BrokerProcess) -> None:
    """A share group's overrides are checked against the broker's min/max settings
    (KIP-932, KIP-1240: lock duration 15000-60000, delivery count limit 2-10, session
    timeout 45000-60000, heartbeat 5000-15000, record locks 100-4000 by default):
    INVALID_CONFIG, nothing kept."""
    admin = _admin(broker)
    group = _name("sgroup")
    _alter(admin, _resource("GROUP", group, ("share.record.lock.duration.ms", "20000", SET),
                            ("share.delivery.count.limit", "10", SET),
                            ("share.session.timeout.ms", "50000", SET),
                            ("share.partition.max.record.locks", "4000", SET),
                            ("share.renew.acknowledge.enable", "false", SET)))
    for op in [("share.record.lock.duration.ms", "10000", SET),   # below the broker's min
               ("share.record.lock.duration.ms", "70000", SET),   # above its max
               ("share.delivery.count.limit", "11", SET),
               ("share.session.timeout.ms", "40000", SET),
               ("share.session.timeout.ms", "70000", SET),
               ("share.heartbeat.interval.ms", "4000", SET),
               ("share.heartbeat.interval.ms", "16000", SET),
               ("share.partition.max.record.locks", "4001", SET)]:
        err = _error(admin, _resource("GROUP", group, op))
        assert err.code() == KafkaError.INVALID_CONFIG, op
        assert op[0] in err.str(), err
    configs = _describe(admin, "GROUP", group)
    assert {k: configs[k].value for k in ("share.record.lock.duration.ms",
                                          "share.delivery.count.limit",
                                          "share.session.timeout.ms",
                                          "share.heartbeat.interval.ms",
                                          "share.partition.max.record.locks",
                                          "share.renew.acknowledge.enable")} == {
        "share.record.lock.duration.ms": "20000", "share.delivery.count.limit": "10",
        "share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "5000",
        "share.partition.max.record.locks": "4000", "share.renew.acknowledge.enable": "false"}


def _produce(bootstrap: str, topic: str, values: list[bytes], **kw: Any) -> list[Any]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    results: list[Any] = []
    for v in values:  # one batch each
        p.produce(topic, value=v, key=b"k", on_delivery=lambda e, m: results.append(e or m),
                  **kw)
        assert p.flush(15) == 0
    return results


def test_broker_configs_restart_and_effects(fresh_broker: BrokerProcess) -> None:
    fresh_broker.config["log.segment.bytes"] = "50000000"
    fresh_broker.start()
    admin = _admin(fresh_broker)
    topic, group = _name("t"), _name("g")
    _create(admin, topic)
    _alter(admin, _resource("BROKER", "0", ("log.retention.ms", "7200000", SET),
                            ("log.message.timestamp.type", "LogAppendTime", SET)))
    # confluent-kafka refuses the cluster-wide default resource (BROKER ""): samsa's Admin
    with Admin(fresh_broker.bootstrap) as samsa_admin:
        samsa_admin.alter_configs("broker", "", set={"log.retention.bytes": "900000000"})
    _alter(admin, _resource("TOPIC", topic, ("max.message.bytes", "2000", SET)))
    _alter(admin, _resource("GROUP", group, ("consumer.session.timeout.ms", "55000", SET)))

    def check() -> None:
        configs = _describe(admin, "BROKER", "0")
        assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert configs["log.retention.bytes"].source == \
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert configs["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
        assert configs["num.partitions"].is_read_only
        assert not configs["log.retention.ms"].is_read_only
        with Admin(fresh_broker.bootstrap) as samsa_admin:
            defaults = samsa_admin.describe_configs("broker", "")
        assert {k: (c.value, c.source) for k, c in defaults.items()} == {
            "log.retention.bytes": ("900000000", "dynamic-default-broker")}
        t = _describe(admin, "TOPIC", topic)
        assert (t["retention.ms"].value, t["retention.ms"].source) == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert t["retention.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert t["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert t["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        g = _describe(admin, "GROUP", group)
        assert g["consumer.session.timeout.ms"].value == "55000"

    check()
    # Effective at once: LogAppendTime from the broker default, the topic's message size.
    before = int(time.time() * 1000)
    ok, too_big = _produce(fresh_broker.bootstrap, topic, [b"x" * 100, b"y" * 5000])
    assert ok.error() is None and ok.timestamp()[0] == 2 and ok.timestamp()[1] >= before
    assert too_big.code() == KafkaError.MSG_SIZE_TOO_LARGE

    for bad, code in [(_resource("BROKER", "0", ("num.partitions", "3", SET)),
                       KafkaError.INVALID_REQUEST),
                      (_resource("BROKER", "0", ("log.retention.ms", "soon", SET)),
                       KafkaError.INVALID_REQUEST),
                      (_resource("BROKER", "0", ("log.cleanup.policy", "never", SET)),
                       KafkaError.INVALID_REQUEST)]:
        assert _error(admin, bad).code() == code
    # librdkafka would send it to node 7: samsa's Admin
    with Admin(fresh_broker.bootstrap) as samsa_admin, \
            pytest.raises(Exception, match=r"invalid_request.*expected 0"):
        samsa_admin.alter_configs("broker", "7", set={"log.retention.ms": "1"})

    assert fresh_broker.stop() == 0
    fresh_broker.start()
    admin = _admin(fresh_broker)
    check()
    ok, too_big = _produce(fresh_broker.bootstrap, topic, [b"x" * 100, b"y" * 5000])
    assert ok.error() is None and ok.timestamp()[0] == 2
    assert too_big.code() == KafkaError.MSG_SIZE_TOO_LARGE

    _alter(admin, _resource("BROKER", "0", ("log.retention.ms", None, DELETE),
                            ("log.message.timestamp.type", None, DELETE)))
    t = _describe(admin, "TOPIC", topic)
    assert (t["retention.ms"].value, t["retention.ms"].source) == (
        "604800000", ConfigSource.DEFAULT_CONFIG.value)
    ok, = _produce(fresh_broker.bootstrap, topic, [b"z"], timestamp=1_000_000)
    assert ok.timestamp() == (1, 1_000_000)


def test_retention_change_deletes_old_segments(fresh_broker: BrokerProcess) -> None:
    fresh_broker.config["log.retention.check.interval.ms"] = "100"
    fresh_broker.start()
    admin = _admin(fresh_broker)
    topic = _name("ret")
    _create(admin, topic, {"segment.bytes": "2000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    results = _produce(fresh_broker.bootstrap, topic, [b"x" * 200] * 40, timestamp=hour_ago)
    assert all(m.error() is None for m in results)
    tp = TopicPartition(topic, 0)

    def earliest() -> int:
        offset: int = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset
        return offset

    time.sleep(0.5)  # several retention checks under the default retention.ms
    assert earliest() == 0
    _alter(admin, _resource("TOPIC", topic, ("retention.ms", "60000", SET)))
    deadline = time.monotonic() + 15
    while earliest() == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    start = earliest()
    assert 30 <= start <= 40, "retention.ms changed at run time deleted no segment"
    end = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset
    assert end == 40
