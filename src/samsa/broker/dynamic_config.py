"""Configs changed at run time (AlterConfigs): the broker's dynamic settings and group configs.

Kafka keeps three layers under a static ``server.properties``: per-broker dynamic settings
(resource ``BROKER`` named by the node id), cluster-wide dynamic defaults (``BROKER`` with an
empty name) and per-group configs (resource ``GROUP``, Kafka 4.x). A setting resolves as
per-broker dynamic, then dynamic default, then static, then Kafka's default. Topic overrides
live with the topics; the rest is kept by the engine's
:class:`~samsa.broker.storage.ConfigStore` (``dynamic-configs.json`` on a single node, the
cluster's database on a cluster, where a change made through one node reaches the others on
their next cluster tick: :meth:`DynamicConfigs.refresh`).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from samsa.broker.config import SETTINGS, BrokerConfig, ConfigError
from samsa.broker.storage import ConfigStore, StoredConfigs
from samsa.share.reset import OffsetReset

log = logging.getLogger("samsa.broker")

# DescribeConfigs ConfigSource values
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8

DYNAMIC_BROKER_SETTINGS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.retention.ms", "log.retention.bytes",
    "log.index.interval.bytes", "log.cleanup.policy", "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "message.max.bytes", "transaction.partition.verification.enable",
})
"""Broker settings that may change at run time (Kafka's DynamicLogConfig ones samsa has,
and its ProducerStateManagerConfig's verification switch)."""

BROKER_LIST_SETTINGS = frozenset({"log.cleanup.policy"})

GROUP_SYNONYMS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "consumer.assignment.interval.ms": "group.consumer.assignment.interval.ms",
    "consumer.assignor.offload.enable": "group.consumer.assignor.offload.enable",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
}
"""Group config name -> the broker setting that supplies its default (Kafka's GroupConfig)."""

GROUP_STRING_DEFAULTS = {"share.auto.offset.reset": "latest",
                         "share.isolation.level": "read_uncommitted",
                         "share.renew.acknowledge.enable": "true",
                         "errors.deadletterqueue.topic.name": ""}
"""Group configs without a broker setting behind them, and Kafka's default."""

_GROUP_BOOLEANS = frozenset({"consumer.assignor.offload.enable"})
#: int group configs -> the least value Kafka's GroupConfig takes (``atLeast``)
_GROUP_MINIMUM = {"consumer.session.timeout.ms": 1, "consumer.heartbeat.interval.ms": 1,
                  "consumer.assignment.interval.ms": 0, "share.record.lock.duration.ms": 1000,
                  "share.delivery.count.limit": 2, "share.session.timeout.ms": 1,
                  "share.heartbeat.interval.ms": 1, "share.partition.max.record.locks": 100}

#: int group configs -> the broker settings bounding them (Kafka's GroupConfig and, for
#: share.delivery.count.limit, KIP-1240)
_GROUP_BOUNDS = {
    f"{kind}.{name}": (f"group.{kind}.min.{name}", f"group.{kind}.max.{name}")
    for kind, name in (("consumer", "heartbeat.interval.ms"), ("consumer", "session.timeout.ms"),
                       ("consumer", "assignment.interval.ms"),
                       ("share", "heartbeat.interval.ms"), ("share", "session.timeout.ms"),
                       ("share", "record.lock.duration.ms"), ("share", "delivery.count.limit"),
                       ("share", "partition.max.record.locks"))}

_KNOWN = {s.name for s in SETTINGS}
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Resolved:
    """A setting's value and where it comes from (a ConfigSource), with its synonyms:
    every layer that sets it, highest precedence first, as (name, value, source)."""

    value: str | None
    source: int
    synonyms: tuple[tuple[str, str | None, int], ...]


def text(value: Any) -> str | None:
    """A setting's value as Kafka prints it (booleans lower case, unset as null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class DynamicConfigs:
    """The dynamic layers, their store (None: kept in memory only), and the broker config
    they resolve to."""

    def __init__(self, static: BrokerConfig, store: ConfigStore | None = None) -> None:
        self.static = static
        self.store = store
        self._brokers: dict[str, dict[str, str]] = {}
        self._groups: dict[str, dict[str, str]] = {}
        self.effective = static
        self.changing = asyncio.Lock()
        """Held by a change from reading the settings it replaces until they are stored
        (one node's changes of a resource never overwrite each other)."""

    # -- reading ------------------------------------------------------------------------
    def broker(self, name: str) -> dict[str, str]:
        """The dynamic settings of ``BROKER`` resource ``name`` ("" for the defaults)."""
        return dict(self._brokers.get(name, {}))

    def group(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def resolve_broker(self, name: str, per_broker: bool = True) -> Resolved:
        """Effective value of broker setting ``name``; without ``per_broker`` only the
        dynamic default layer counts (DescribeConfigs of the BROKER resource "")."""
        layers: list[tuple[str, str | None, int]] = []
        if per_broker:
            mine = self._brokers.get(str(self.static.node_id), {})
            if name in mine:
                layers.append((name, mine[name], DYNAMIC_BROKER_CONFIG))
        defaults = self._brokers.get("", {})
        if name in defaults:
            layers.append((name, defaults[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if per_broker:
            values = self.static.values or {}
            if name in values:
                layers.append((name, text(values[name]), STATIC_BROKER_CONFIG))
            layers.append((name, text(_default(name)), DEFAULT_CONFIG))
        if not layers:
            return Resolved("", DEFAULT_CONFIG, ())
        return Resolved(layers[0][1], layers[0][2], tuple(layers))

    def resolve_group(self, group_id: str, name: str) -> Resolved:
        """Effective value of group config ``name`` for ``group_id``."""
        if name in GROUP_STRING_DEFAULTS:
            value = self._groups.get(group_id, {}).get(name)
            if value is None:
                return Resolved(GROUP_STRING_DEFAULTS[name], DEFAULT_CONFIG,
                                ((name, GROUP_STRING_DEFAULTS[name], DEFAULT_CONFIG),))
            return Resolved(value, GROUP_CONFIG, ((name, value, GROUP_CONFIG),))
        synonym = self.resolve_broker(GROUP_SYNONYMS[name])
        layers = [(synonym_name, v, s) for synonym_name, v, s in synonym.synonyms]
        own = self._groups.get(group_id, {})
        if name in own:
            layers.insert(0, (name, own[name], GROUP_CONFIG))
        return Resolved(layers[0][1], layers[0][2], tuple(layers))

    def group_overrides(self, group_id: str) -> dict[str, int]:
        """The group configs set for ``group_id`` as numbers (the coordinator's
        ``CoordinatorConfig.group_configs`` lookup; the broker's settings fill the rest)."""
        own = self._groups.get(group_id)
        if not own:
            return {}
        return {k: (int(v.strip().lower() == "true") if k in _GROUP_BOOLEANS else int(v))
                for k, v in own.items() if k in GROUP_SYNONYMS}

    # -- validating ---------------------------------------------------------------------
    def check_broker(self, name: str, props: Mapping[str, str],
                     alone: bool = False) -> BrokerConfig:
        """The broker config that ``props`` as the dynamic settings of ``name`` would give
        (with ``alone``, over the static settings only: a layer must be valid by itself, not
        only where the node's own settings hide it); raises ConfigError (Kafka answers
        INVALID_REQUEST) for names that are unknown or not dynamic and for bad values."""
        unknown = sorted(k for k in props if k not in _KNOWN)
        if unknown:
            raise ConfigError(f"Unknown broker configs: {', '.join(unknown)}")
        static = sorted(k for k in props if k not in DYNAMIC_BROKER_SETTINGS)
        if static:
            raise ConfigError(f"Cannot update these configs dynamically: {', '.join(static)}")
        layers = {} if alone else dict(self._brokers)
        layers[name] = dict(props)
        return self._resolve(layers)

    def check_group(self, props: Mapping[str, str], broker: BrokerConfig | None = None) -> None:
        """Kafka's GroupConfig.validate against the broker's bounds; raises ConfigError
        (Kafka answers INVALID_CONFIG)."""
        cfg = broker or self.effective
        for key in props:
            if key not in GROUP_SYNONYMS and key not in GROUP_STRING_DEFAULTS:
                raise ConfigError(f"Unknown group config name: {key}")
        reset = props.get("share.auto.offset.reset")
        if reset is not None:
            try:
                OffsetReset.parse(str(reset))
            except ValueError as exc:
                raise ConfigError(f"Invalid value {reset} for configuration "
                                  f"share.auto.offset.reset: {exc}") from None
        renew = props.get("share.renew.acknowledge.enable")
        if renew is not None and str(renew).strip().lower() not in ("true", "false"):
            raise ConfigError(f"Invalid value {renew} for configuration "
                              "share.renew.acknowledge.enable: Expected value to be either "
                              "true or false")
        isolation = props.get("share.isolation.level")
        if isolation is not None and isolation not in ("read_committed", "read_uncommitted"):
            raise ConfigError(f"Invalid value {isolation} for configuration "
                              "share.isolation.level: String must be one of: "
                              "read_committed, read_uncommitted")
        values: dict[str, int] = {}
        for key, synonym in GROUP_SYNONYMS.items():
            raw = props.get(key, cfg[synonym])
            if key in _GROUP_BOOLEANS:
                if str(text(raw)).strip().lower() not in ("true", "false"):
                    raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                                      "Expected value to be either true or false")
                continue
            try:
                values[key] = int(str(raw).strip())
            except ValueError:
                raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                                  "Not a number of type INT") from None
            least = _GROUP_MINIMUM[key]
            if not least <= values[key] <= _INT32_MAX:
                raise ConfigError(f"Invalid value {raw} for configuration {key}: "
                                  f"Value must be at least {least}")
        for key, (lo, hi) in _GROUP_BOUNDS.items():
            if values[key] < int(cfg[lo]):
                raise ConfigError(f"{key} must be greater than or equal to {lo}")
            if values[key] > int(cfg[hi]):
                raise ConfigError(f"{key} must be less than or equal to {hi}")
        for kind in ("consumer", "share"):
            if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
                raise ConfigError(f"{kind}.session.timeout.ms must be greater than "
                                  f"{kind}.heartbeat.interval.ms")

    # -- changing -----------------------------------------------------------------------
    async def set_broker(self, name: str, props: Mapping[str, str]) -> None:
        """Replace the dynamic settings of ``BROKER`` resource ``name`` (validated by
        :meth:`check_broker`) and persist them (awaiting the store: hold :attr:`changing`
        from reading the old settings on)."""
        if self.store is None:
            self._apply(StoredConfigs(_put(self._brokers, name, props), self._groups))
        else:
            self._take(await self.store.save_broker(name, props))

    async def set_group(self, group_id: str, props: Mapping[str, str]) -> None:
        if self.store is None:
            self._groups = _put(self._groups, group_id, props)
        else:
            self._take(await self.store.save_group(group_id, props))

    def load(self) -> None:
        """Read the stored configs; a layer that no longer validates is skipped (and
        logged) so the broker still starts."""
        self.refresh()

    def refresh(self) -> bool:
        """Take the store's configs if they changed (another node of a cluster changed
        them); True if the broker settings did (the topics' log configs follow them)."""
        stored = None if self.store is None else self.store.snapshot()
        if stored is None:
            return False
        before = self._brokers
        self._apply(stored)
        return self._brokers != before

    # -- internals ----------------------------------------------------------------------
    def _take(self, stored: StoredConfigs | None) -> None:
        if stored is not None:  # None: a snapshot as new was taken while the store wrote
            self._apply(stored)

    def _resolve(self, layers: Mapping[str, Mapping[str, str]]) -> BrokerConfig:
        merged: dict[str, Any] = dict(self.static.values or {})
        merged.update(layers.get("", {}))
        merged.update(layers.get(str(self.static.node_id), {}))
        values = BrokerConfig.create(data_dir=self.static.data_dir, overrides=merged).values
        return replace(self.static, values=values)

    def _apply(self, stored: StoredConfigs) -> None:
        self._groups = {str(g): {str(k): str(v) for k, v in props.items()}
                        for g, props in stored.groups.items() if props}
        self._brokers = {}
        for name in sorted(stored.brokers):  # the defaults ("") first
            props = {str(k): str(v) for k, v in stored.brokers[name].items()}
            if not props:
                continue
            try:
                self.check_broker(name, props)
            except ConfigError as exc:
                log.warning("ignoring dynamic configs of broker %r: %s", name, exc)
                continue
            self._brokers[name] = props
        self.effective = self._resolve(self._brokers)


def _put(layers: Mapping[str, Mapping[str, str]], name: str,
         props: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``layers`` with ``name``'s replaced by ``props`` (dropped when empty)."""
    out = {k: dict(v) for k, v in layers.items() if k != name}
    if props:
        out[name] = dict(props)
    return out


def _default(name: str) -> Any:
    return BrokerConfig()[name]
