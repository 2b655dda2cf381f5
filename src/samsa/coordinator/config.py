"""Coordinator configuration, with Kafka's property names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
}


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

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> CoordinatorConfig:
        """Build from Kafka-style properties; unknown names are ignored."""
        kwargs: dict[str, int] = {}
        for name, value in props.items():
            attr = _NAMES.get(name)
            if attr is not None:
                kwargs[attr] = int(str(value))
        return cls(**kwargs)
