"""Configs changed on a live broker through Apache Kafka's Java ``Admin`` (the ``ConfigsDriver``):
incrementalAlterConfigs SET/DELETE/APPEND/SUBTRACT on topics, the broker (its own node and the
cluster-wide defaults) and groups, validateOnly, Kafka's exceptions per resource, and what
describeConfigs reports (values, sources, synonyms, types), before and after a restart.

Kafka 4.x's Admin has no ``alterConfigs`` (legacy AlterConfigs); test_alter_configs.py covers
that API with confluent-kafka."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.javakit import Event, JavaKit, compiled

pytestmark = pytest.mark.conformance

DEFAULT, TOPIC_SRC = "DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG"
BROKER_SRC, CLUSTER_SRC = "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"
GROUP_SRC = "DYNAMIC_GROUP_CONFIG"
INVALID_CONFIG = "InvalidConfigurationException"
INVALID_REQUEST = "InvalidRequestException"
UNKNOWN_TOPIC = "UnknownTopicOrPartitionException"


@pytest.fixture
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaKit]:
    k = compiled(tmp_path_factory)
    yield k
    k.stop_all()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(kit: JavaKit, bootstrap: str, *ops: str) -> list[Event]:
    """Run ``ops`` in one ConfigsDriver JVM; one successful event per operation, in order."""
    events = [e for e in kit.run("ConfigsDriver", bootstrap, *ops, timeout=90) if "op" in e]
    assert [e["op"] for e in events] == list(range(len(ops))), events
    for op, e in zip(ops, events, strict=True):
        assert e["ok"], (op, e)
    return events


def configs(event: Event) -> dict[str, dict[str, Any]]:
    """A describe event's configs; fails on its error."""
    assert event["error"] is None, event
    result: dict[str, dict[str, Any]] = event["configs"]
    return result


#: a group's share-group configs (KIP-932, KIP-1191) at their broker defaults
SHARE_DEFAULTS = {"share.session.timeout.ms": ("45000", DEFAULT),
                  "share.heartbeat.interval.ms": ("5000", DEFAULT),
                  "share.record.lock.duration.ms": ("30000", DEFAULT),
                  "share.delivery.count.limit": ("5", DEFAULT),
                  "share.auto.offset.reset": ("latest", DEFAULT),
                  "share.isolation.level": ("read_uncommitted", DEFAULT),
                  "share.partition.max.record.locks": ("2000", DEFAULT),
                  "share.renew.acknowledge.enable": ("true", DEFAULT),
                  "errors.deadletterqueue.topic.name": ("", DEFAULT)}


def values(event: Event) -> dict[str, tuple[str | None, str]]:
    """A describe event as {key: (value, source)}."""
    return {k: (c["value"], c["source"]) for k, c in configs(event).items()}


def errors(event: Event) -> dict[str, str | None]:
    """An incremental event's per-resource errors as {"TYPE:NAME": exception class or None}."""
    return {r: e and e.split(":", 1)[0] for r, e in event["results"].items()}


def test_incremental_topic_operations(broker: BrokerProcess, kit: JavaKit) -> None:
    t = _name("jcfg")
    e = run(kit, broker.bootstrap,
            f"create {t} segment.ms=3600000",
            f"incremental topic {t} set retention.ms 3600000 append cleanup.policy compact",
            f"describe topic {t} retention.ms cleanup.policy segment.ms max.message.bytes",
            f"incremental validate-only topic {t} set retention.ms 1 delete cleanup.policy "
            "set max.message.bytes 100",
            f"describe topic {t} retention.ms cleanup.policy max.message.bytes",
            f"incremental topic {t} delete retention.ms subtract cleanup.policy delete "
            "delete segment.ms delete no.such.key",
            f"describe topic {t} retention.ms cleanup.policy segment.ms")
    assert e[1]["results"] == {f"TOPIC:{t}": None}
    after_set = configs(e[2])
    assert values(e[2]) == {"retention.ms": ("3600000", TOPIC_SRC),
                            "cleanup.policy": ("compact,delete", TOPIC_SRC),
                            "segment.ms": ("3600000", TOPIC_SRC),
                            "max.message.bytes": ("1048588", DEFAULT)}
    retention = after_set["retention.ms"]
    assert retention["synonyms"] == [["retention.ms", "3600000", TOPIC_SRC],
                                     ["log.retention.ms", "604800000", DEFAULT]]
    assert (retention["type"], retention["default"], retention["readOnly"]) == (
        "LONG", False, False)
    assert after_set["cleanup.policy"]["type"] == "LIST"
    assert after_set["max.message.bytes"]["type"] == "INT"
    assert after_set["max.message.bytes"]["default"] is True

    assert e[3]["validateOnly"] is True and e[3]["results"] == {f"TOPIC:{t}": None}
    assert values(e[4]) == {"retention.ms": ("3600000", TOPIC_SRC),
                            "cleanup.policy": ("compact,delete", TOPIC_SRC),
                            "max.message.bytes": ("1048588", DEFAULT)}

    assert e[5]["results"] == {f"TOPIC:{t}": None}
    assert values(e[6]) == {"retention.ms": ("604800000", DEFAULT),
                            "cleanup.policy": ("compact", TOPIC_SRC),
                            "segment.ms": ("604800000", DEFAULT)}


def test_topic_errors(broker: BrokerProcess, kit: JavaKit) -> None:
    t, missing = _name("jbad"), _name("jmissing")
    e = run(kit, broker.bootstrap,
            f"create {t} retention.ms=1000",
            f"incremental topic {t} set retention.ms soon",
            f"incremental topic {t} set retention.ms -5",
            f"incremental topic {t} set no.such.config 1",
            f"incremental topic {t} set cleanup.policy forever",
            f"incremental topic {t} append retention.ms 5",
            # nothing of a refused resource is applied, not even its valid keys
            f"incremental topic {t} set segment.ms 60000 set retention.ms soon",
            f"incremental topic {t} set retention.ms 5 set retention.ms 6",
            # errors are per resource: the good one beside them is applied
            f"incremental topic {missing} set retention.ms 1000 & topic {t} set retention.ms 2000"
            f" & topic bad/name set retention.ms 1",
            f"describe topic {missing}",
            f"describe topic {t} retention.ms segment.ms")
    for i in range(1, 6):
        assert errors(e[i]) == {f"TOPIC:{t}": INVALID_CONFIG}, e[i]
    assert "retention.ms" in e[1]["results"][f"TOPIC:{t}"]
    assert "no.such.config" in e[3]["results"][f"TOPIC:{t}"]
    assert "not LIST" in e[5]["results"][f"TOPIC:{t}"]
    assert errors(e[6]) == {f"TOPIC:{t}": INVALID_CONFIG}
    assert errors(e[7]) == {f"TOPIC:{t}": INVALID_REQUEST}
    assert errors(e[8]) == {f"TOPIC:{missing}": UNKNOWN_TOPIC, f"TOPIC:{t}": None,
                            "TOPIC:bad/name": "InvalidTopicException"}
    assert e[9]["error"].startswith(UNKNOWN_TOPIC + ":")  # the refused alter created nothing
    assert values(e[10]) == {"retention.ms": ("2000", TOPIC_SRC),
                             "segment.ms": ("604800000", DEFAULT)}


BROKER_KEYS = "log.retention.ms log.retention.bytes log.cleanup.policy num.partitions " \
              "message.max.bytes"


def test_broker_and_group_configs_survive_restart(fresh_broker: BrokerProcess,
                                                  kit: JavaKit) -> None:
    fresh_broker.start()
    t, g = _name("jt"), _name("jg")
    describes = [f"describe broker 0 {BROKER_KEYS}",
                 'describe broker ""',
                 f"describe topic {t} retention.ms retention.bytes cleanup.policy "
                 "max.message.bytes",
                 f"describe group {g}"]
    e = run(kit, fresh_broker.bootstrap,
            f"create {t}",
            f"describe broker 0 {BROKER_KEYS}",
            f'incremental validate-only broker 0 set log.retention.ms 7200000 & broker "" set '
            f"log.retention.bytes 900000000 & group {g} set consumer.session.timeout.ms 50000",
            f"describe broker 0 {BROKER_KEYS}",
            f"describe group {g}",
            f"incremental broker 0 set log.retention.ms 7200000 append log.cleanup.policy compact"
            ' & broker "" set log.retention.bytes 900000000 set log.retention.ms 3600000'
            f" & group {g} set consumer.session.timeout.ms 50000"
            f" & topic {t} set max.message.bytes 2000",
            'incremental broker 0 set num.partitions 3 & broker "" set log.retention.ms soon'
            f" & group {g} set consumer.session.timeout.ms 1000"
            f" & group {_name('jg')} set no.such.config 1",
            # bad cluster defaults, though this node's own setting hides them
            'incremental broker "" set log.cleanup.policy never',
            *describes)
    defaults = configs(e[1])
    assert values(e[1]) == {"log.retention.ms": ("604800000", DEFAULT),
                            "log.retention.bytes": ("-1", DEFAULT),
                            "log.cleanup.policy": ("delete", DEFAULT),
                            "num.partitions": ("1", DEFAULT),
                            "message.max.bytes": ("1048588", DEFAULT)}
    assert {k: (c["type"], c["readOnly"]) for k, c in defaults.items()} == {
        "log.retention.ms": ("LONG", False), "log.retention.bytes": ("LONG", False),
        "log.cleanup.policy": ("LIST", False), "num.partitions": ("INT", True),
        "message.max.bytes": ("INT", False)}

    assert errors(e[2]) == {"BROKER:0": None, "BROKER:": None, f"GROUP:{g}": None}
    assert {**e[3], "ts": 0} == {**e[1], "op": 3, "ts": 0}  # validateOnly changed nothing
    assert values(e[4]) == {"consumer.session.timeout.ms": ("45000", DEFAULT),
                            "consumer.heartbeat.interval.ms": ("5000", DEFAULT),
                            "consumer.assignment.interval.ms": ("1000", DEFAULT),
                            "consumer.assignor.offload.enable": ("true", DEFAULT),
                            **SHARE_DEFAULTS}

    assert errors(e[5]) == {"BROKER:0": None, "BROKER:": None, f"GROUP:{g}": None,
                            f"TOPIC:{t}": None}
    refused = errors(e[6])
    assert list(refused.values()) == [INVALID_REQUEST, INVALID_REQUEST, INVALID_CONFIG,
                                      INVALID_CONFIG], e[6]
    assert "num.partitions" in e[6]["results"]["BROKER:0"]
    assert "log.retention.ms" in e[6]["results"]["BROKER:"]
    assert errors(e[7]) == {"BROKER:": INVALID_REQUEST}

    broker_now, cluster, topic, group = e[8:12]
    assert values(broker_now) == {"log.retention.ms": ("7200000", BROKER_SRC),
                                  "log.retention.bytes": ("900000000", CLUSTER_SRC),
                                  "log.cleanup.policy": ("delete,compact", BROKER_SRC),
                                  "num.partitions": ("1", DEFAULT),
                                  "message.max.bytes": ("1048588", DEFAULT)}
    assert configs(broker_now)["log.retention.ms"]["synonyms"] == [
        ["log.retention.ms", "7200000", BROKER_SRC], ["log.retention.ms", "3600000", CLUSTER_SRC],
        ["log.retention.ms", "604800000", DEFAULT]]
    assert values(cluster) == {"log.retention.ms": ("3600000", CLUSTER_SRC),
                               "log.retention.bytes": ("900000000", CLUSTER_SRC)}
    tc = values(topic)
    assert tc["retention.ms"] == ("7200000", BROKER_SRC)
    assert tc["retention.bytes"] == ("900000000", CLUSTER_SRC)
    assert tc["cleanup.policy"][1] == BROKER_SRC
    assert tc["max.message.bytes"] == ("2000", TOPIC_SRC)
    assert values(group) == {"consumer.session.timeout.ms": ("50000", GROUP_SRC),
                             "consumer.heartbeat.interval.ms": ("5000", DEFAULT),
                             "consumer.assignment.interval.ms": ("1000", DEFAULT),
                             "consumer.assignor.offload.enable": ("true", DEFAULT),
                             **SHARE_DEFAULTS}
    assert configs(group)["consumer.session.timeout.ms"]["synonyms"] == [
        ["consumer.session.timeout.ms", "50000", GROUP_SRC],
        ["group.consumer.session.timeout.ms", "45000", DEFAULT]]

    assert fresh_broker.stop() == 0
    fresh_broker.start()  # same port
    after = run(kit, fresh_broker.bootstrap, *describes,
                f"incremental broker 0 delete log.retention.ms & group {g} delete "
                "consumer.session.timeout.ms",
                f"describe topic {t} retention.ms",
                f"describe group {g} consumer.session.timeout.ms")
    for before, now in zip(e[8:12], after[:4], strict=True):
        assert now["configs"] == before["configs"]
    assert errors(after[4]) == {"BROKER:0": None, f"GROUP:{g}": None}
    assert values(after[5]) == {"retention.ms": ("3600000", CLUSTER_SRC)}
    assert values(after[6]) == {"consumer.session.timeout.ms": ("45000", DEFAULT)}


def test_group_protocol_settings_have_kafkas_types(broker: BrokerProcess, kit: JavaKit) -> None:
    """The KIP-848 broker settings as Kafka types them: the comma-separated ones are LIST."""
    keys = ("group.coordinator.rebalance.protocols group.consumer.assignors "
            "group.consumer.migration.policy group.consumer.max.size")
    (described,) = run(kit, broker.bootstrap, f"describe broker 0 {keys}")
    assert {k: (c["value"], c["type"]) for k, c in configs(described).items()} == {
        "group.coordinator.rebalance.protocols": ("classic,consumer", "LIST"),
        "group.consumer.assignors": ("uniform,range", "LIST"),
        "group.consumer.migration.policy": ("bidirectional", "STRING"),
        "group.consumer.max.size": ("2147483647", "INT")}
