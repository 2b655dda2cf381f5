"""Coordinator configuration, with Kafka's property names and defaults."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from samsa.assignors.server.registry import resolve_server_assignors

INT32_MAX = 2**31 - 1

#: Kafka's timeout for a new member's JoinGroup while the group is rebalancing.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

_NAMES = {
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.max.size": "max_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
    "group.consumer.min.heartbeat.interval.ms": "consumer_min_heartbeat_interval_ms",
    "group.consumer.max.heartbeat.interval.ms": "consumer_max_heartbeat_interval_ms",
    "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "group.consumer.min.session.timeout.ms": "consumer_min_session_timeout_ms",
    "group.consumer.max.session.timeout.ms": "consumer_max_session_timeout_ms",
    "group.consumer.max.size": "consumer_max_size",
    "group.history.max.events": "history_max_events",
    "group.consumer.assignment.interval.ms": "consumer_assignment_interval_ms",
    "group.consumer.min.assignment.interval.ms": "consumer_min_assignment_interval_ms",
    "group.consumer.max.assignment.interval.ms": "consumer_max_assignment_interval_ms",
    "group.consumer.regex.refresh.interval.ms": "consumer_regex_refresh_interval_ms",
    "group.share.heartbeat.interval.ms": "share_heartbeat_interval_ms",
    "group.share.min.heartbeat.interval.ms": "share_min_heartbeat_interval_ms",
    "group.share.max.heartbeat.interval.ms": "share_max_heartbeat_interval_ms",
    "group.share.session.timeout.ms": "share_session_timeout_ms",
    "group.share.min.session.timeout.ms": "share_min_session_timeout_ms",
    "group.share.max.session.timeout.ms": "share_max_session_timeout_ms",
    "group.share.max.size": "share_max_size",
}

#: boolean settings (Kafka's BOOLEAN type: true or false)
_BOOL_NAMES = {"group.consumer.assignor.offload.enable": "consumer_assignor_offload_enable"}

#: list-valued settings (comma-separated, as Kafka's LIST type)
_LIST_NAMES = {
    "group.coordinator.rebalance.protocols": "rebalance_protocols",
    "group.consumer.assignors": "consumer_assignors",
}

#: string-valued settings (lower-cased)
_STRING_NAMES = {"group.consumer.migration.policy": "consumer_migration_policy"}

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")

#: the group types samsa serves (Kafka also knows ``streams``); share groups are on when the
#: ``share.version`` feature is finalized, as in Kafka 4.2+, and ``share`` may be listed
REBALANCE_PROTOCOLS = ("classic", "consumer", "share")
_KAFKA_ONLY_PROTOCOLS = ("streams",)

#: Kafka's GroupConfig names a group may override (AlterConfigs on a GROUP resource)
GROUP_SESSION_TIMEOUT = "consumer.session.timeout.ms"
GROUP_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
GROUP_ASSIGNMENT_INTERVAL = "consumer.assignment.interval.ms"
GROUP_ASSIGNOR_OFFLOAD = "consumer.assignor.offload.enable"

#: Kafka's ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``: a group's regular expressions are not
#: resolved again within 10 s of their last resolution, whatever asks for it.
REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000

GroupConfigs = Callable[[str], Mapping[str, int]]
"""A group id -> the group configs set for it (only those set; empty for none; booleans
as 1 and 0)."""


def _no_group_configs(group_id: str) -> Mapping[str, int]:
    return {}


class InvalidCoordinatorConfig(ValueError):
    """Settings that contradict each other or name something unknown (Kafka refuses to
    start with them: GroupCoordinatorConfig's checks)."""


@dataclass(frozen=True)
class CoordinatorConfig:
    """Group coordinator settings (Kafka names in :meth:`from_properties`)."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = INT32_MAX
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    #: KIP-848 consumer groups
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    consumer_heartbeat_interval_ms: int = 5000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_session_timeout_ms: int = 45000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_max_size: int = INT32_MAX
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    #: samsa: the rebalance history events kept per group (0: no history). The broker's
    #: default (``group.history.max.events``) is 100; a bare core writes only Kafka's records
    history_max_events: int = 0
    #: KIP-1263: at most one target assignment per group per interval, computed off the
    #: request path (by the edge's background worker) when offload is enabled
    consumer_assignment_interval_ms: int = 1000
    consumer_min_assignment_interval_ms: int = 0
    consumer_max_assignment_interval_ms: int = 15000
    consumer_assignor_offload_enable: bool = True
    #: how long a resolved regular expression stands before a heartbeat resolves it again
    consumer_regex_refresh_interval_ms: int = 600_000
    #: KIP-932 share groups (Kafka's defaults)
    share_heartbeat_interval_ms: int = 5000
    share_min_heartbeat_interval_ms: int = 5000
    share_max_heartbeat_interval_ms: int = 15000
    share_session_timeout_ms: int = 45000
    share_min_session_timeout_ms: int = 45000
    share_max_session_timeout_ms: int = 60000
    share_max_size: int = 200
    #: per-group overrides, asked on every use so AlterConfigs applies at once (the broker
    #: injects its dynamic group configs; the coordinator imports nothing of the broker)
    group_configs: GroupConfigs = field(default=_no_group_configs, compare=False, repr=False)

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in {p.lower() for p in self.rebalance_protocols}

    @property
    def online_upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def online_downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("downgrade", "bidirectional")

    def consumer_session_timeout_for(self, group_id: str) -> int:
        """The group's ``consumer.session.timeout.ms``, else the broker's (Kafka's
        ``consumerGroupSessionTimeoutMs(groupId)``)."""
        return self.group_configs(group_id).get(GROUP_SESSION_TIMEOUT,
                                                self.consumer_session_timeout_ms)

    def consumer_heartbeat_interval_for(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms``, else the broker's."""
        return self.group_configs(group_id).get(GROUP_HEARTBEAT_INTERVAL,
                                                self.consumer_heartbeat_interval_ms)

    def consumer_assignment_interval_for(self, group_id: str) -> int:
        """The group's ``consumer.assignment.interval.ms``, else the broker's (Kafka's
        ``consumerGroupAssignmentIntervalMs(groupId)``)."""
        return self.group_configs(group_id).get(GROUP_ASSIGNMENT_INTERVAL,
                                                self.consumer_assignment_interval_ms)

    def consumer_assignor_offload_for(self, group_id: str) -> bool:
        """The group's ``consumer.assignor.offload.enable``, else the broker's."""
        return bool(self.group_configs(group_id).get(GROUP_ASSIGNOR_OFFLOAD,
                                                     self.consumer_assignor_offload_enable))

    def share_session_timeout_for(self, group_id: str) -> int:
        """The group's ``share.session.timeout.ms``, else the broker's."""
        return self.group_configs(group_id).get("share.session.timeout.ms",
                                                self.share_session_timeout_ms)

    def share_heartbeat_interval_for(self, group_id: str) -> int:
        """The group's ``share.heartbeat.interval.ms``, else the broker's."""
        return self.group_configs(group_id).get("share.heartbeat.interval.ms",
                                                self.share_heartbeat_interval_ms)

    def validate(self) -> None:
        """Kafka's start-up checks of the consumer- and share-group settings; raises
        :class:`InvalidCoordinatorConfig` naming the settings at fault."""
        for group_type, kind in itertools.product(("consumer", "share"),
                                                  ("heartbeat.interval", "session.timeout")):
            attr = kind.replace(".", "_")
            value, lo, hi = (getattr(self, f"{group_type}_{attr}_ms"),
                             getattr(self, f"{group_type}_min_{attr}_ms"),
                             getattr(self, f"{group_type}_max_{attr}_ms"))
            name = f"group.{group_type}.{kind}.ms"
            low, high = (f"group.{group_type}.min.{kind}.ms",
                         f"group.{group_type}.max.{kind}.ms")
            for setting, number in ((name, value), (low, lo), (high, hi)):
                if number < 1:
                    raise InvalidCoordinatorConfig(f"{setting} must be at least 1, got {number}")
            _require(hi >= lo, f"{high} ({hi}) must be greater than or equal to {low} ({lo})")
            _require(value >= lo, f"{name} ({value}) must be greater than or equal to {low} ({lo})")
            _require(value <= hi, f"{name} ({value}) must be less than or equal to {high} ({hi})")
        interval, lo, hi = (self.consumer_assignment_interval_ms,
                            self.consumer_min_assignment_interval_ms,
                            self.consumer_max_assignment_interval_ms)
        name = "group.consumer.assignment.interval.ms"
        low, high = "group.consumer.min.assignment.interval.ms", \
            "group.consumer.max.assignment.interval.ms"
        for setting, number in ((name, interval), (low, lo), (high, hi)):
            _require(number >= 0, f"{setting} must be at least 0, got {number}")
        _require(hi >= lo, f"{high} ({hi}) must be greater than or equal to {low} ({lo})")
        _require(interval >= lo,
                 f"{name} ({interval}) must be greater than or equal to {low} ({lo})")
        _require(interval <= hi, f"{name} ({interval}) must be less than or equal to {high} ({hi})")
        _require(self.consumer_regex_refresh_interval_ms >= 1,
                 "group.consumer.regex.refresh.interval.ms must be at least 1, got "
                 f"{self.consumer_regex_refresh_interval_ms}")
        hb, session = self.consumer_heartbeat_interval_ms, self.consumer_session_timeout_ms
        _require(hb < session, f"group.consumer.heartbeat.interval.ms ({hb}) must be less than "
                               f"group.consumer.session.timeout.ms ({session})")
        hb, session = self.share_heartbeat_interval_ms, self.share_session_timeout_ms
        _require(0 < hb < session, f"group.share.heartbeat.interval.ms ({hb}) must be at least "
                                   f"1 and less than group.share.session.timeout.ms ({session})")
        _require(1 <= self.share_max_size <= 1000,
                 f"group.share.max.size must be between 1 and 1000, got {self.share_max_size}")
        _require(self.consumer_max_size >= 1, "group.consumer.max.size must be at least 1")
        _require(self.history_max_events >= 0, "group.history.max.events must be at least 0")
        _require(self.consumer_migration_policy in MIGRATION_POLICIES,
                 f"group.consumer.migration.policy: invalid value "
                 f"{self.consumer_migration_policy!r}, expected one of "
                 f"{', '.join(MIGRATION_POLICIES)}")
        protocols = [p.lower() for p in self.rebalance_protocols]
        for p in protocols:
            if p in _KAFKA_ONLY_PROTOCOLS:
                raise InvalidCoordinatorConfig(
                    f"group.coordinator.rebalance.protocols: samsa does not serve {p!r} groups")
            _require(p in REBALANCE_PROTOCOLS,
                     f"group.coordinator.rebalance.protocols: unknown protocol {p!r}, expected "
                     f"{' and/or '.join(REBALANCE_PROTOCOLS)}")
        _require("classic" in protocols, "group.coordinator.rebalance.protocols: disabling the "
                                         "'classic' protocol is not supported")
        try:
            resolve_server_assignors(self.consumer_assignors)
        except (ValueError, TypeError) as exc:
            raise InvalidCoordinatorConfig(f"group.consumer.assignors: {exc}") from None

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> CoordinatorConfig:
        """Build from Kafka-style properties; unknown names are ignored."""
        kwargs: dict[str, object] = {}
        for name, value in props.items():
            attr = _NAMES.get(name)
            if attr is not None:
                kwargs[attr] = int(str(value))
            elif name in _LIST_NAMES:
                items = value if isinstance(value, list | tuple) else str(value).split(",")
                kwargs[_LIST_NAMES[name]] = tuple(str(i).strip() for i in items if str(i).strip())
            elif name in _STRING_NAMES:
                kwargs[_STRING_NAMES[name]] = str(value).strip().lower()
            elif name in _BOOL_NAMES:
                kwargs[_BOOL_NAMES[name]] = parse_bool(name, value)
        return cls(**kwargs)  # type: ignore[arg-type]


def parse_bool(name: str, value: object) -> bool:
    """Kafka's BOOLEAN: ``true`` or ``false`` (any case), or a bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidCoordinatorConfig(f"{name}: expected true or false, got {value!r}")
    return text == "true"


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InvalidCoordinatorConfig(message)
