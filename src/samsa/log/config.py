"""Per-topic log configuration, named and defaulted as in Kafka's topic configs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["BROKER_SYNONYMS", "CONFIG_TYPES", "LIST_CONFIGS", "LogConfig"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def _int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError("not an integer") from None
        if not lo <= value <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return value

    return parse


def _ratio(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be in [0, 1]")
    return value


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return parse


def _cleanup_policy(raw: str) -> str:
    parts = sorted({p.strip() for p in raw.split(",") if p.strip()})
    if not parts or any(p not in ("compact", "delete") for p in parts):
        raise ValueError("must be delete, compact or compact,delete")
    return ",".join(parts)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Kafka name -> (field name, parser). Defaults live on the dataclass fields.
_SPEC: dict[str, tuple[str, Callable[[str], Any]]] = {
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "compression.type": (
        "compression_type",
        _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    "delete.retention.ms": ("delete_retention_ms", _int(0, LONG_MAX)),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int(0, LONG_MAX)),
    "flush.messages": ("flush_messages", _int(1, LONG_MAX)),
    "flush.ms": ("flush_ms", _int(0, LONG_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _int(0, INT_MAX)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _int(1, LONG_MAX)),
    "max.message.bytes": ("max_message_bytes", _int(0, INT_MAX)),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _int(0, LONG_MAX)),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _int(0, LONG_MAX)),
    "message.timestamp.type": (
        "message_timestamp_type",
        _choice("CreateTime", "LogAppendTime"),
    ),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int(0, LONG_MAX)),
    "min.insync.replicas": ("min_insync_replicas", _int(1, INT_MAX)),
    "preallocate": ("preallocate", _bool),
    "retention.bytes": ("retention_bytes", _int(-1, LONG_MAX)),
    "retention.ms": ("retention_ms", _int(-1, LONG_MAX)),
    "segment.bytes": ("segment_bytes", _int(14, INT_MAX)),
    "segment.index.bytes": ("segment_index_bytes", _int(8, INT_MAX)),
    "segment.jitter.ms": ("segment_jitter_ms", _int(0, LONG_MAX)),
    "segment.ms": ("segment_ms", _int(1, LONG_MAX)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
}

BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
"""Topic config name -> the broker-wide setting that supplies its default (DescribeConfigs)."""

_INT_CONFIGS = {"index.interval.bytes", "max.message.bytes", "min.insync.replicas",
                "segment.bytes", "segment.index.bytes"}
_STRING_CONFIGS = {"compression.type", "message.timestamp.type"}
LIST_CONFIGS = frozenset({"cleanup.policy"})
"""Kafka's LIST-typed topic configs: the ones IncrementalAlterConfigs may APPEND/SUBTRACT."""


def _kafka_type(key: str) -> int:
    """Kafka's ConfigType id: 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST."""
    parse = _SPEC[key][1]
    if parse is _bool:
        return 1
    if key in LIST_CONFIGS:
        return 7
    if parse is _ratio:
        return 6
    if key in _STRING_CONFIGS:
        return 2
    return 3 if key in _INT_CONFIGS else 5


CONFIG_TYPES: dict[str, int] = {key: _kafka_type(key) for key in _SPEC}
"""Topic config name -> Kafka's ConfigType id (DescribeConfigs v3+)."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic-level log settings with Kafka's defaults.

    Only the settings the log acts on matter here (segment.*, index.interval.bytes,
    retention.*, cleanup.policy, message.timestamp.type, max.message.bytes and the cleaner
    settings); the rest are accepted and reported back so tools that set them keep working.
    """

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * 3600 * 1000
    file_delete_delay_ms: int = 60000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    compression_type: str = "producer"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    preallocate: bool = False
    unclean_leader_election_enable: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka-named string values on top of ``base`` (default: Kafka's).

        Raises ValueError naming the key for unknown keys and invalid values.
        """
        changes: dict[str, Any] = {}
        for key, raw in mapping.items():
            spec = _SPEC.get(key)
            if spec is None:
                raise ValueError(f"unknown topic config {key!r}")
            attr, parse = spec
            try:
                changes[attr] = parse(str(raw))
            except ValueError as exc:
                raise ValueError(f"invalid value {raw!r} for {key}: {exc}") from None
        config = replace(base or cls(), **changes)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
            raise ValueError(
                "conflict topic config setting min.compaction.lag.ms "
                f"({config.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({config.max_compaction_lag_ms})"
            )
        return config

    def to_mapping(self) -> dict[str, str]:
        """All settings as Kafka-named strings, for DescribeConfigs."""
        return {key: _fmt(getattr(self, attr)) for key, (attr, _) in sorted(_SPEC.items())}

    @staticmethod
    def names() -> list[str]:
        """The Kafka config names this class understands."""
        return sorted(_SPEC)


assert {f.name for f in fields(LogConfig)} == {attr for attr, _ in _SPEC.values()}
