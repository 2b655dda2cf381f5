"""Options of the ``samsa`` data source, parsed and validated once on the driver.

Names and meanings follow Spark's Kafka source; option names are case-insensitive (Spark
hands them over lower-cased). Offsets are JSON ``{"topic": {"0": 42}}`` where -2 means
earliest and -1 latest; every offset is the next one to read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "offsets_to_json",
    "parse_offsets_json",
]

EARLIEST = -2
LATEST = -1

_SELECTORS = ("subscribe", "subscribepattern", "assign")


class OptionError(ValueError):
    """An invalid option of the samsa data source."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``earliest``, ``latest``, per-partition offsets or timestamps.

    ``kind`` is one of ``earliest``, ``latest``, ``offsets``, ``timestamps``, ``timestamp``.
    """

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Per-partition offsets (``offsets``) or timestamps in ms (``timestamps``)."""
    timestamp: int = 0
    """One timestamp for all partitions (``timestamp``)."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    return None if value is None else str(value)


def parse_offsets_json(text: str, option: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 42}}`` -> {TopicPartition: offset}, with a clear error message."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {option}: malformed JSON {text!r} ({exc.msg}); expected "
                          'e.g. {"topic": {"0": 42}}') from None
    if not isinstance(data, dict):
        raise OptionError(f'option {option}: expected a JSON object like {{"topic": '
                          f'{{"0": 42}}}}, got {text!r}')
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {option}: topic {topic!r} must map partition numbers to "
                              f"offsets, got {parts!r}")
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise OptionError(f"option {option}: partition {part!r} of topic {topic!r} is "
                                  "not a number") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise OptionError(f"option {option}: offset of {topic}-{p} must be an integer, "
                                  f"got {offset!r}")
            out[TopicPartition(topic, p)] = offset
    return out


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} -> ``{"topic": {"0": offset}}`` in a canonical order."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """Inverse of :func:`offsets_to_json` (offsets as Spark hands them back)."""
    return {TopicPartition(t, int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}


def _offset_spec(options: Mapping[str, str], prefix: str, default: str,
                 batch: bool = False) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets`` and their timestamp variants."""
    name = f"{prefix}Offsets"
    by_ts = _get(options, f"{prefix}OffsetsByTimestamp")
    one_ts = _get(options, f"{prefix}Timestamp")
    given = [n for n, v in ((name, _get(options, name)),
                            (f"{prefix}OffsetsByTimestamp", by_ts),
                            (f"{prefix}Timestamp", one_ts)) if v is not None]
    if len(given) > 1:
        raise OptionError(f"options {', '.join(given)} are exclusive: give only one")
    if one_ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(one_ts))
        except ValueError:
            raise OptionError(f"option {prefix}Timestamp must be milliseconds since the epoch, "
                              f"got {one_ts!r}") from None
    if by_ts is not None:
        return OffsetSpec("timestamps", parse_offsets_json(by_ts, f"{prefix}OffsetsByTimestamp"))
    text = (_get(options, name) or default).strip()
    if text.lower() in ("earliest", "latest"):
        kind = text.lower()
        if batch and prefix == "ending" and kind == "earliest":
            raise OptionError("endingOffsets=earliest is not allowed for batch queries")
        if batch and prefix == "starting" and kind == "latest":
            raise OptionError("startingOffsets=latest is not allowed for batch queries")
        return OffsetSpec(kind)
    if not text.startswith("{"):
        raise OptionError(f"option {name} must be earliest, latest or JSON like "
                          f'{{"topic": {{"0": 42}}}}, got {text!r}')
    offsets = parse_offsets_json(text, name)
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise OptionError(f"option {name}: offset {off} of {tp.topic}-{tp.partition} is "
                              "invalid (use -2 for earliest, -1 for latest)")
        if batch and prefix == "starting" and off == LATEST:
            raise OptionError(f"option {name}: latest (-1) is not allowed as a batch start "
                              f"({tp.topic}-{tp.partition})")
        if batch and prefix == "ending" and off == EARLIEST:
            raise OptionError(f"option {name}: earliest (-2) is not allowed as a batch end "
                              f"({tp.topic}-{tp.partition})")
    return OffsetSpec("offsets", offsets)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    if value.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {value!r}")


def _int(options: Mapping[str, str], name: str, minimum: int) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {n}")
    return n


def _security(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``kafka.security.protocol``, ``kafka.sasl.*`` and ``kafka.ssl.*`` options (Spark's
    Kafka source passes ``kafka.``-prefixed options to the client), checked on the driver."""
    from samsa.client.security import from_properties

    pairs = tuple(sorted((k[len("kafka."):], v) for k, v in options.items()
                         if k.startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl."))))
    try:
        from_properties(dict(pairs))
    except ValueError as exc:
        raise OptionError(f"option kafka.{exc}") from None
    return pairs


def client_settings(security: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """samsa client settings (``security_protocol`` ...) of the ``security`` options."""
    from samsa.client.security import from_properties

    return from_properties(dict(security))


def _isolation(options: Mapping[str, str]) -> str:
    """``isolation.level`` / ``kafka.isolation.level`` (the consumer property Spark's Kafka
    source passes through); read_uncommitted when unset."""
    level = _get(options, "isolation.level") or _get(options, "kafka.isolation.level")
    if level is None:
        return "read_uncommitted"
    if level.strip().lower() not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"option kafka.isolation.level must be read_uncommitted or "
                          f"read_committed, not {level!r}")
    return level.strip().lower()


def _bootstrap(options: Mapping[str, str]) -> str:
    servers = _get(options, "bootstrap.servers") or _get(options, "kafka.bootstrap.servers")
    if not servers:
        raise OptionError("option bootstrap.servers is required (e.g. 127.0.0.1:9092)")
    return servers


@dataclass(frozen=True)
class SourceOptions:
    """Validated reader options (picklable; shipped to executors with each partition)."""

    bootstrap: str
    selector: str
    """``subscribe``, ``subscribePattern`` or ``assign``."""
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    fetch_max_bytes: int = 8 * 1024 * 1024
    request_timeout_ms: int = 30000
    batch_records: int = 16384
    """Most records per Arrow batch handed to Spark (the JVM takes batches of ~2 MB with
    less CPU per record than whole 8 MiB fetch responses)."""
    arrow: bool = True
    """Hand Spark Arrow batches (``False``: row tuples, slower; for comparison)."""
    security: tuple[tuple[str, str], ...] = ()
    """Kafka client properties for TLS and SASL (``kafka.security.protocol`` ...)."""
    read_committed: bool = False
    """``kafka.isolation.level=read_committed`` (or ``isolation.level``): offsets end at the
    last stable offset and records of aborted transactions are left out. The default is
    read_uncommitted, as the Kafka consumer's and so Spark's Kafka source's."""

    def matches(self, topic: str) -> bool:
        """Does ``topic`` belong to this source's topic selection?"""
        if self.selector == "subscribe":
            return topic in self.topics
        if self.selector == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.assigned)

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, batch: bool) -> SourceOptions:
        """Validate ``options`` for a streaming (``batch=False``) or batch read."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        given = [s for s in _SELECTORS if opts.get(s) is not None]
        if len(given) != 1:
            names = "subscribe, subscribePattern, assign"
            if not given:
                raise OptionError(f"one of the options {names} is required")
            raise OptionError(f"options {names} are exclusive, but got "
                              f"{', '.join(_display(g) for g in given)}")
        kw: dict[str, Any] = {"bootstrap": _bootstrap(opts), "security": _security(opts)}
        sel = given[0]
        value = opts[sel].strip()
        if sel == "subscribe":
            topics = tuple(sorted({t.strip() for t in value.split(",") if t.strip()}))
            if not topics:
                raise OptionError("option subscribe needs at least one topic name")
            kw.update(selector="subscribe", topics=topics)
        elif sel == "subscribepattern":
            if not value:
                raise OptionError("option subscribePattern is empty")
            try:
                re.compile(value)
            except re.error as exc:
                raise OptionError(f"option subscribePattern: invalid regex {value!r}: "
                                  f"{exc}") from None
            kw.update(selector="subscribePattern", pattern=value)
        else:
            assigned = _parse_assign(value)
            kw.update(selector="assign", assigned=assigned)
        kw["starting"] = _offset_spec(opts, "starting", "earliest" if batch else "latest",
                                      batch=batch)
        if batch:
            kw["ending"] = _offset_spec(opts, "ending", "latest", batch=True)
        else:
            for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
                if _get(opts, name) is not None:
                    raise OptionError(f"option {name} is for batch queries only")
        kw["max_offsets_per_trigger"] = _int(opts, "maxOffsetsPerTrigger", 1)
        kw["min_offsets_per_trigger"] = _int(opts, "minOffsetsPerTrigger", 1)
        delay = _get(opts, "maxTriggerDelay")
        if delay is not None:
            kw["max_trigger_delay_ms"] = parse_duration_ms(delay, "maxTriggerDelay")
        kw["min_partitions"] = _int(opts, "minPartitions", 1)
        kw["fail_on_data_loss"] = _bool(opts, "failOnDataLoss", True)
        kw["include_headers"] = _bool(opts, "includeHeaders", False)
        kw["group_id"] = _get(opts, "groupId") or None
        kw["arrow"] = _bool(opts, "arrowBatches", True)
        kw["read_committed"] = _isolation(opts) == "read_committed"
        for key, name in (("fetch_max_bytes", "fetch.max.bytes"),
                          ("request_timeout_ms", "request.timeout.ms"),
                          ("batch_records", "arrowBatchRecords")):
            n = _int(opts, name, 1) or _int(opts, f"kafka.{name}", 1)
            if n is not None:
                kw[key] = n
        if kw["starting"].kind == "offsets" and sel == "assign":
            extra = set(kw["starting"].offsets) - set(kw["assigned"])
            if extra:
                raise OptionError("startingOffsets names partitions that are not assigned: "
                                  f"{_tps(extra)}")
        return cls(**kw)


@dataclass(frozen=True)
class SinkOptions:
    """Validated writer options."""

    bootstrap: str
    topic: str | None = None
    batch_size: int = 262144
    compression: str | None = None
    security: tuple[tuple[str, str], ...] = ()
    """Kafka client properties for TLS and SASL (``kafka.security.protocol`` ...)."""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SinkOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        kw: dict[str, Any] = {"bootstrap": _bootstrap(opts), "topic": opts.get("topic") or None,
                              "security": _security(opts)}
        size = _int(opts, "batch.size", 1)
        if size is not None:
            kw["batch_size"] = size
        comp = _get(opts, "compression.type")
        if comp:
            if comp not in ("none", "gzip", "snappy", "lz4", "zstd"):
                raise OptionError(f"option compression.type: unknown codec {comp!r}")
            kw["compression"] = None if comp == "none" else comp
        return cls(**kw)


_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
             "d": 86_400_000}


def parse_duration_ms(text: str, option: str) -> int:
    """Spark's time strings (``15m``, ``10s``, ``500ms``; no unit: ms) in milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in ("", *_UNITS_MS):
        raise OptionError(f"option {option} must be a duration like 15m, 30s or 500ms, "
                          f"got {text!r}")
    return int(int(m.group(1)) * _UNITS_MS.get(m.group(2), 1))


def _display(lower: str) -> str:
    return {"subscribepattern": "subscribePattern"}.get(lower, lower)


def _tps(tps: set[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option assign: malformed JSON {text!r} ({exc.msg}); expected e.g. "
                          '{"topic": [0, 1]}') from None
    if not isinstance(data, dict) or not data:
        raise OptionError(f'option assign must be a JSON object like {{"topic": [0, 1]}}, '
                          f"got {text!r}")
    out: set[TopicPartition] = set()
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise OptionError(f"option assign: topic {topic!r} must map to a list of partition "
                              f"numbers, got {parts!r}")
        out.update(TopicPartition(topic, p) for p in parts)
    return tuple(sorted(out))
