"""Start-up checks of the consumer-group settings (Kafka's GroupCoordinatorConfig): a broker
config that breaks them is refused with a message naming the settings."""

from __future__ import annotations

import pytest

from samsa.broker.config import BrokerConfig, ConfigError
from samsa.coordinator.config import CoordinatorConfig, InvalidCoordinatorConfig


@pytest.mark.parametrize(("props", "message"), [
    ({"group.consumer.session.timeout.ms": "30000"},
     "group.consumer.session.timeout.ms (30000) must be greater than or equal to "
     "group.consumer.min.session.timeout.ms (45000)"),
    ({"group.consumer.session.timeout.ms": "70000"},
     "group.consumer.session.timeout.ms (70000) must be less than or equal to "
     "group.consumer.max.session.timeout.ms (60000)"),
    ({"group.consumer.min.session.timeout.ms": "61000", "group.consumer.session.timeout.ms":
      "61000"}, "group.consumer.max.session.timeout.ms (60000) must be greater than or equal"),
    ({"group.consumer.heartbeat.interval.ms": "4000"},
     "group.consumer.heartbeat.interval.ms (4000) must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms (5000)"),
    ({"group.consumer.heartbeat.interval.ms": "16000"}, "must be less than or equal to "
     "group.consumer.max.heartbeat.interval.ms (15000)"),
    ({"group.consumer.max.heartbeat.interval.ms": "4000"},
     "group.consumer.max.heartbeat.interval.ms (4000) must be greater than or equal"),
    ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms":
      "5000"}, "group.consumer.heartbeat.interval.ms (5000) must be less than "
     "group.consumer.session.timeout.ms (5000)"),
    ({"group.consumer.heartbeat.interval.ms": "0",
      "group.consumer.min.heartbeat.interval.ms": "0"}, "must be at least 1"),
    ({"group.consumer.migration.policy": "bogus"},
     "group.consumer.migration.policy: invalid value 'bogus'"),
    ({"group.coordinator.rebalance.protocols": "consumer"},
     "disabling the 'classic' protocol is not supported"),
    ({"group.coordinator.rebalance.protocols": "classic,bogus"}, "unknown protocol 'bogus'"),
    ({"group.coordinator.rebalance.protocols": "classic,streams"},
     "samsa does not serve 'streams' groups"),
    ({"group.consumer.assignors": "uniform,nope"}, "unknown server assignor 'nope'"),
    ({"group.consumer.assignors": "no.such.module:Assignor"}, "cannot load server assignor"),
    ({"group.consumer.assignors": "range,range"}, "listed twice"),
    ({"group.consumer.max.size": "0"}, "group.consumer.max.size must be at least 1"),
    ({"group.consumer.assignment.interval.ms": "16000"},
     "group.consumer.assignment.interval.ms (16000) must be less than or equal to "
     "group.consumer.max.assignment.interval.ms (15000)"),
    ({"group.consumer.min.assignment.interval.ms": "2000"},
     "group.consumer.assignment.interval.ms (1000) must be greater than or equal to "
     "group.consumer.min.assignment.interval.ms (2000)"),
    ({"group.consumer.max.assignment.interval.ms": "500"},
     "group.consumer.assignment.interval.ms (1000) must be less than or equal to "
     "group.consumer.max.assignment.interval.ms (500)"),
    ({"group.consumer.max.assignment.interval.ms": "500",
      "group.consumer.min.assignment.interval.ms": "700"},
     "group.consumer.max.assignment.interval.ms (500) must be greater than or equal to "
     "group.consumer.min.assignment.interval.ms (700)"),
    ({"group.consumer.assignment.interval.ms": "-1"},
     "group.consumer.assignment.interval.ms must be at least 0"),
    ({"group.consumer.regex.refresh.interval.ms": "0"},
     "group.consumer.regex.refresh.interval.ms must be at least 1"),
])
def test_bad_group_settings_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidCoordinatorConfig) as exc:
        CoordinatorConfig.from_properties(props).validate()
    assert message in str(exc.value)
    with pytest.raises(ConfigError) as broker_exc:
        BrokerConfig.create(overrides=props)
    assert message in str(broker_exc.value)


@pytest.mark.parametrize("props", [
    {},
    {"group.consumer.migration.policy": "Downgrade"},  # case-insensitive, as Kafka
    {"group.coordinator.rebalance.protocols": "classic"},
    {"group.coordinator.rebalance.protocols": "CLASSIC, consumer"},
    {"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor"},
    {"group.consumer.session.timeout.ms": "4000", "group.consumer.min.session.timeout.ms":
     "1000", "group.consumer.heartbeat.interval.ms": "300",
     "group.consumer.min.heartbeat.interval.ms": "100"},
    {"group.consumer.assignment.interval.ms": "0", "group.consumer.assignor.offload.enable":
     "FALSE", "group.consumer.regex.refresh.interval.ms": "1000"},
    {"group.consumer.assignment.interval.ms": "15000"},
])
def test_good_group_settings_are_accepted(props: dict[str, str]) -> None:
    CoordinatorConfig.from_properties(props).validate()
    BrokerConfig.create(overrides=props)


def test_kip_1263_defaults_and_names() -> None:
    """Kafka 4.3's defaults: one target per second at most, computed off the request path,
    regexes resolved again every 10 minutes."""
    default = CoordinatorConfig()
    assert (default.consumer_assignment_interval_ms, default.consumer_min_assignment_interval_ms,
            default.consumer_max_assignment_interval_ms, default.consumer_assignor_offload_enable,
            default.consumer_regex_refresh_interval_ms) == (1000, 0, 15000, True, 600_000)
    config = CoordinatorConfig.from_properties({
        "group.consumer.assignment.interval.ms": "250",
        "group.consumer.assignor.offload.enable": "false",
        "group.consumer.regex.refresh.interval.ms": "5000"})
    assert (config.consumer_assignment_interval_ms, config.consumer_assignor_offload_enable,
            config.consumer_regex_refresh_interval_ms) == (250, False, 5000)
    with pytest.raises(InvalidCoordinatorConfig, match="expected true or false"):
        CoordinatorConfig.from_properties({"group.consumer.assignor.offload.enable": "maybe"})
    with pytest.raises(ConfigError, match=r"group\.coordinator\.background\.threads"):
        BrokerConfig.create(overrides={"group.coordinator.background.threads": "0"})
