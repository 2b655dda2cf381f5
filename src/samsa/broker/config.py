"""Broker configuration under Kafka's names and defaults.

Values come from Kafka's ``server.properties`` names (``num.partitions``,
``auto.create.topics.enable``, ``log.segment.bytes`` …), given as ``--config key=value``
or in a properties file. Unknown names and bad values raise :class:`ConfigError` with a
message naming the key, so ``samsa serve`` can print one clear line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    listener_value,
    parse_listeners,
    split_prefixed,
)


class ConfigError(ValueError):
    """A configuration key or value that cannot be used."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One broker setting: its type, Kafka default and short documentation."""

    name: str
    type: type
    default: Any
    doc: str


_DAY_MS = 86_400_000

SETTINGS: tuple[Setting, ...] = (
    Setting("node.id", int, 0, "Id of this broker node."),
    Setting("advertised.host", str, "", "Host given to clients (default: listen host)."),
    Setting("advertised.port", int, 0, "Port given to clients (default: listen port)."),
    Setting("cluster.id", str, "samsa-cluster", "Cluster id reported in Metadata."),
    Setting("broker.rack", str, None, "Rack of this broker, reported in Metadata."),
    Setting("cluster.lease.ttl.ms", int, 10_000,
            "Cluster (--storage): a node that stops renewing for this long loses its leases."),
    Setting("num.partitions", int, 1, "Partitions of auto-created topics."),
    Setting("default.replication.factor", int, 1, "Replication factor of auto-created topics."),
    Setting("auto.create.topics.enable", bool, True, "Create unknown topics on Metadata."),
    Setting("delete.topic.enable", bool, True, "Allow DeleteTopics."),
    Setting("authorizer.class.name", str, "",
            "Kafka's ACL authorizer (org.apache.kafka.metadata.authorizer.StandardAuthorizer); "
            "unset: no authorization."),
    Setting("super.users", str, "",
            "Principals allowed everything, separated by ';' (User:admin;User:ops)."),
    Setting("allow.everyone.if.no.acl.found", bool, False,
            "Allow an action on a resource that no ACL covers."),
    Setting("socket.request.max.bytes", int, 104_857_600, "Largest request frame accepted."),
    Setting("message.max.bytes", int, 1_048_588, "Largest record batch accepted."),
    Setting("log.segment.bytes", int, 1_073_741_824, "Segment size before rolling."),
    Setting("log.roll.ms", int, 7 * _DAY_MS, "Segment age before rolling."),
    Setting("log.retention.ms", int, 7 * _DAY_MS, "Time retention (-1: keep forever)."),
    Setting("log.retention.bytes", int, -1, "Size retention per partition (-1: none)."),
    Setting("log.retention.check.interval.ms", int, 300_000, "Retention/compaction period."),
    Setting("log.index.interval.bytes", int, 4096, "Bytes between offset index entries."),
    Setting("log.cleanup.policy", str, "delete", "Default cleanup.policy of topics."),
    Setting("log.message.timestamp.type", str, "CreateTime", "CreateTime or LogAppendTime."),
    Setting("log.message.timestamp.before.max.ms", int, 2**63 - 1,
            "Largest age of a produced CreateTime timestamp."),
    Setting("log.message.timestamp.after.max.ms", int, 2**63 - 1,
            "Largest lead of a produced CreateTime timestamp over the broker's clock."),
    Setting("log.flush.interval.ms", int, 1000, "Background fsync period for acks<-1 data."),
    Setting("offsets.topic.num.partitions", int, 50, "Partitions of __consumer_offsets."),
    Setting("offsets.topic.segment.bytes", int, 104_857_600, "Segment size of __consumer_offsets."),
    Setting("transaction.state.log.num.partitions", int, 50,
            "Partitions of __transaction_state (created on the first transactional id)."),
    Setting("transaction.state.log.segment.bytes", int, 104_857_600,
            "Segment size of __transaction_state."),
    Setting("transaction.max.timeout.ms", int, 900_000,
            "Largest transaction timeout a producer may ask for."),
    Setting("transactional.id.expiration.ms", int, 604_800_000,
            "How long an idle transactional id is remembered."),
    Setting("transaction.partition.verification.enable", bool, True,
            "KIP-890: a partition's leader asks the transaction coordinator before a "
            "transactions-v1 producer's first batch opens a transaction there."),
    Setting("transaction.version", int, 2,
            "The transaction.version feature finalized (Kafka sets it with kafka-features): "
            "2 transactions v2 (KIP-890), 0 v1 only."),
    Setting("offsets.retention.minutes", int, 10_080, "Committed offset retention."),
    Setting("offsets.retention.check.interval.ms", int, 600_000, "Offset expiry period."),
    Setting("offset.metadata.max.bytes", int, 4096, "Largest offset commit metadata."),
    Setting("group.initial.rebalance.delay.ms", int, 3000, "Delay of an Empty group's first join."),
    Setting("group.min.session.timeout.ms", int, 6000, "Smallest session timeout accepted."),
    Setting("group.max.session.timeout.ms", int, 1_800_000, "Largest session timeout accepted."),
    Setting("group.max.size", int, 2_147_483_647, "Most members of a group."),
    Setting("group.consumer.session.timeout.ms", int, 45000,
            "Session timeout of KIP-848 consumer groups."),
    Setting("group.consumer.min.session.timeout.ms", int, 45000,
            "Smallest consumer.session.timeout.ms a group may set."),
    Setting("group.consumer.max.session.timeout.ms", int, 60000,
            "Largest consumer.session.timeout.ms a group may set."),
    Setting("group.consumer.heartbeat.interval.ms", int, 5000,
            "Heartbeat interval of KIP-848 consumer groups."),
    Setting("group.consumer.min.heartbeat.interval.ms", int, 5000,
            "Smallest consumer.heartbeat.interval.ms a group may set."),
    Setting("group.consumer.max.heartbeat.interval.ms", int, 15000,
            "Largest consumer.heartbeat.interval.ms a group may set."),
    Setting("group.coordinator.rebalance.protocols", str, "classic,consumer",
            "Group protocols served (classic, consumer, share); without consumer, "
            "ConsumerGroupHeartbeat/Describe are not advertised. Share groups are on with "
            "the share.version feature, as in Kafka 4.2+."),
    Setting("group.consumer.max.size", int, 2_147_483_647, "Most members of a consumer group."),
    Setting("group.consumer.assignors", str, "uniform,range",
            "Server-side assignors of consumer groups; the first is the default."),
    Setting("group.share.session.timeout.ms", int, 45000,
            "Session timeout of share groups (KIP-932)."),
    Setting("group.share.min.session.timeout.ms", int, 45000,
            "Smallest share.session.timeout.ms a group may set."),
    Setting("group.share.max.session.timeout.ms", int, 60000,
            "Largest share.session.timeout.ms a group may set."),
    Setting("group.share.heartbeat.interval.ms", int, 5000,
            "Heartbeat interval of share groups."),
    Setting("group.share.min.heartbeat.interval.ms", int, 5000,
            "Smallest share.heartbeat.interval.ms a group may set."),
    Setting("group.share.max.heartbeat.interval.ms", int, 15000,
            "Largest share.heartbeat.interval.ms a group may set."),
    Setting("group.share.max.size", int, 200, "Most members of a share group (1-1000)."),
    Setting("group.share.record.lock.duration.ms", int, 30000,
            "How long a share consumer holds the records it acquired (acquisition lock; "
            "1000-3600000)."),
    Setting("group.share.min.record.lock.duration.ms", int, 15000,
            "Smallest share.record.lock.duration.ms a group may set (1000-30000)."),
    Setting("group.share.max.record.lock.duration.ms", int, 60000,
            "Largest share.record.lock.duration.ms a group may set (30000-3600000)."),
    Setting("group.share.delivery.count.limit", int, 5,
            "Deliveries of a record before it is archived (2-10)."),
    Setting("group.share.min.delivery.count.limit", int, 2,
            "Smallest share.delivery.count.limit a group may set (KIP-1240; 2-10)."),
    Setting("group.share.max.delivery.count.limit", int, 10,
            "Largest share.delivery.count.limit a group may set (KIP-1240; 2-10)."),
    Setting("group.share.partition.max.record.locks", int, 2000,
            "Most in-flight records per share partition (100-10000)."),
    Setting("group.share.min.partition.max.record.locks", int, 100,
            "Smallest share.partition.max.record.locks a group may set (100-10000)."),
    Setting("group.share.max.partition.max.record.locks", int, 4000,
            "Largest share.partition.max.record.locks a group may set (100-10000)."),
    Setting("group.share.max.share.sessions", int, 2000,
            "Most share sessions a broker keeps (SHARE_SESSION_LIMIT_REACHED beyond)."),
    Setting("share.coordinator.state.topic.num.partitions", int, 50,
            "Partitions of __share_group_state (created at the first share fetch)."),
    Setting("group.consumer.migration.policy", str, "bidirectional",
            "Online classic <-> consumer group conversion: disabled, upgrade, downgrade, "
            "bidirectional."),
    # -- listeners, TLS, SASL and connection limits (samsa.security; docs/security.md) --
    Setting("listeners", str, "",
            "NAME://HOST:PORT,... to listen on (default: PLAINTEXT:// on --listen)."),
    Setting("advertised.listeners", str, "",
            "NAME://HOST:PORT,... given to clients per listener (default: each listener's)."),
    Setting("listener.security.protocol.map", str, DEFAULT_PROTOCOL_MAP,
            "Listener name to PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    Setting("sasl.enabled.mechanisms", str, "SCRAM-SHA-256,SCRAM-SHA-512",
            "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER."),
    Setting("sasl.jaas.config", str, "",
            "JAAS options; PlainLoginModule user_NAME=\"password\" entries are PLAIN users."),
    Setting("java.security.auth.login.config", str, "",
            "A JAAS file; PlainLoginModule user_NAME entries of its KafkaServer section "
            "(or <listener>.KafkaServer) are PLAIN users."),
    Setting("sasl.server.max.receive.size", int, 524_288,
            "Largest frame accepted before authentication completes."),
    Setting("sasl.server.callback.handler.class", str, "",
            "OAUTHBEARER: Kafka's OAuthBearerUnsecuredValidatorCallbackHandler enables "
            "unsigned tokens (development only)."),
    Setting("sasl.oauthbearer.jwks.endpoint.url", str, "",
            "OAUTHBEARER: file of the issuer's JWKS or PEM public key (file:// or a path)."),
    Setting("sasl.oauthbearer.expected.audience", str, "", "OAUTHBEARER: accepted audiences."),
    Setting("sasl.oauthbearer.expected.issuer", str, "", "OAUTHBEARER: the required issuer."),
    Setting("sasl.oauthbearer.sub.claim.name", str, "sub", "OAUTHBEARER: the principal claim."),
    Setting("sasl.oauthbearer.scope.claim.name", str, "scope", "OAUTHBEARER: scope claim."),
    Setting("sasl.oauthbearer.clock.skew.seconds", int, 30, "OAUTHBEARER: clock skew allowed."),
    Setting("connections.max.reauth.ms", int, 0,
            "KIP-368: SASL sessions last at most this long (0: no limit but a token's)."),
    Setting("connection.failed.authentication.delay.ms", int, 100,
            "KIP-306: delay before answering a failed authentication and closing."),
    Setting("connections.authentication.timeout.ms", int, 10_000,
            "samsa: a connection not authenticated by then is closed (TLS and SASL)."),
    Setting("ssl.keystore.type", str, "PEM", "Only PEM files are served."),
    Setting("ssl.keystore.location", str, "",
            "PEM file with the private key and the certificate chain."),
    Setting("ssl.key.password", str, "", "Password of an encrypted private key."),
    Setting("ssl.truststore.type", str, "PEM", "Only PEM files are served."),
    Setting("ssl.truststore.location", str, "", "PEM file of trusted CA certificates."),
    Setting("ssl.truststore.certificates", str, "", "Trusted CA certificates inline (PEM)."),
    Setting("ssl.client.auth", str, "none", "required, requested or none (mTLS)."),
    Setting("ssl.principal.mapping.rules", str, "DEFAULT",
            "Certificate subject DN to principal name: RULE:pattern/replacement/[LU],DEFAULT."),
    Setting("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    Setting("ssl.cipher.suites", str, "", "OpenSSL cipher list (TLS 1.2; default: OpenSSL's)."),
    Setting("max.connections", int, 2_147_483_647, "Most connections open at once."),
    Setting("max.connections.per.ip", int, 2_147_483_647, "Most connections from one address."),
    Setting("max.connections.per.ip.overrides", str, "",
            "HOST:COUNT,... exceptions to max.connections.per.ip."),
    Setting("connections.max.idle.ms", int, 600_000, "Idle connections are closed after this."),
    Setting("queued.max.request.bytes", int, -1,
            "Most request bytes in flight on one connection before it stops reading "
            "(-1: 128 requests)."),
    Setting("group.history.max.events", int, 100,
            "samsa: rebalance history events kept per group (0: no history)."),
    Setting("console.actions.enable", bool, False,
            "samsa: the web console may execute changing actions (offset resets)."),
    Setting("console.principal", str, "User:ANONYMOUS",
            "samsa: the principal the web console acts as: its ACLs decide what the console "
            "shows and may do; written to the audit log."),
    Setting("console.lag.sample.interval.ms", int, 5000,
            "samsa: how often the console samples lag and pushes live pages."),
    Setting("group.consumer.assignment.interval.ms", int, 1000,
            "KIP-1263: least time between two target assignments of a consumer group."),
    Setting("group.consumer.min.assignment.interval.ms", int, 0,
            "Smallest consumer.assignment.interval.ms a group may set."),
    Setting("group.consumer.max.assignment.interval.ms", int, 15000,
            "Largest consumer.assignment.interval.ms a group may set."),
    Setting("group.consumer.assignor.offload.enable", bool, True,
            "KIP-1263: compute target assignments in a background worker, off the event loop."),
    Setting("group.consumer.regex.refresh.interval.ms", int, 600_000,
            "How long a resolved topic regex of a consumer group stands before it is "
            "resolved again."),
    Setting("group.coordinator.background.threads", int, 2,
            "Background workers for target assignments and regex resolution."),
)

_BY_NAME = {s.name: s for s in SETTINGS}
_DEFAULTS = {s.name: s.default for s in SETTINGS}
#: settings Kafka lets a listener (``listener.name.<l>.``) or mechanism override
_PER_LISTENER = {s.name for s in SETTINGS if s.name.startswith(("ssl.", "sasl."))} | {
    "connections.max.reauth.ms", "max.connections"}


def _parse(setting: Setting, raw: Any) -> Any:
    if isinstance(raw, setting.type) and not (setting.type is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    if setting.type is bool:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(f"{setting.name}: expected true or false, got {text!r}")
    if setting.type is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{setting.name}: expected an integer, got {text!r}") from None
    return text


@dataclass(frozen=True)
class BrokerConfig:
    """Resolved broker settings (Kafka names) plus the listen address and data dir."""

    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: Path = Path("./data")
    values: Mapping[str, Any] | None = None

    def __getitem__(self, name: str) -> Any:
        if self.values is not None and name in self.values:
            return self.values[name]
        try:
            return _BY_NAME[name].default
        except KeyError:
            raise ConfigError(f"unknown broker config {name!r}") from None

    @property
    def node_id(self) -> int:
        return int(self["node.id"])

    @property
    def rack(self) -> str | None:
        """``broker.rack``: None when unset or empty."""
        return self["broker.rack"] or None

    @property
    def advertised_host(self) -> str:
        return str(self["advertised.host"]) or self.host

    @property
    def advertised_port(self) -> int:
        return int(self["advertised.port"]) or self.port

    def items(self) -> Iterable[tuple[Setting, Any, bool]]:
        """Every setting with its value and whether it is the default."""
        for s in SETTINGS:
            explicit = self.values is not None and s.name in self.values
            yield s, self[s.name], not explicit

    @classmethod
    def create(
        cls,
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        data_dir: Path | str = Path("./data"),
        overrides: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        """Validate ``overrides`` (Kafka names) and build a config."""
        values: dict[str, Any] = {}
        for name, raw in (overrides or {}).items():
            prefixed = split_prefixed(name, _PER_LISTENER)
            setting = _BY_NAME.get(prefixed[2] if prefixed else name)
            if setting is None:
                raise ConfigError(f"unknown broker config {name!r}")
            values[name] = _parse(setting, raw)
        if values.get("transaction.version", 2) not in (0, 1, 2):
            raise ConfigError("transaction.version: expected 0, 1 or 2")
        for name in ("num.partitions", "offsets.topic.num.partitions", "socket.request.max.bytes",
                     "message.max.bytes", "log.segment.bytes", "cluster.lease.ttl.ms",
                     "group.coordinator.background.threads",
                     "transaction.state.log.num.partitions", "transaction.max.timeout.ms",
                     "transactional.id.expiration.ms"):
            if name in values and values[name] <= 0:
                raise ConfigError(f"{name}: must be positive, got {values[name]}")
        if values.get("log.message.timestamp.type", "CreateTime") not in (
            "CreateTime", "LogAppendTime"
        ):
            raise ConfigError("log.message.timestamp.type: expected CreateTime or LogAppendTime")
        _check_group_settings(values)
        _check_share_settings(values)
        _check_authorizer_settings(values)
        config = cls(host=host, port=port, data_dir=Path(data_dir), values=values)
        try:
            check_security(config)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return config

    def listeners(self) -> list[Listener]:
        """``listeners``, or one PLAINTEXT listener on the listen address (``--listen``)."""
        if self["listeners"]:
            return parse_listeners(self["listeners"], self["listener.security.protocol.map"])
        return [Listener("PLAINTEXT", self.host, self.port, "PLAINTEXT")]

    def for_listener(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """A setting as one listener (and SASL mechanism) sees it (Kafka's
        ``listener.name.<l>[.<mechanism>].<key>`` overrides)."""
        return listener_value(self.values or {}, _DEFAULTS, listener, key, mechanism)


def check_security(config: BrokerConfig) -> None:
    """Listeners, TLS files and SASL settings that can be used (ValueError otherwise)."""
    from samsa.security.setup import check

    check(config)


def _check_group_settings(values: Mapping[str, Any]) -> None:
    """The group coordinator's own checks (bounds, heartbeat below session, known
    protocols, migration policy and assignors), as Kafka's GroupCoordinatorConfig."""
    from samsa.coordinator.config import CoordinatorConfig, InvalidCoordinatorConfig

    try:
        CoordinatorConfig.from_properties(values).validate()
    except InvalidCoordinatorConfig as exc:
        raise ConfigError(str(exc)) from None


#: share-partition settings: (setting, the least and most Kafka's ShareGroupConfig takes)
_SHARE_RANGES = (
    ("group.share.record.lock.duration.ms", 1000, 3_600_000),
    ("group.share.min.record.lock.duration.ms", 1000, 30_000),
    ("group.share.max.record.lock.duration.ms", 30_000, 3_600_000),
    ("group.share.delivery.count.limit", 2, 10),
    ("group.share.min.delivery.count.limit", 2, 10),
    ("group.share.max.delivery.count.limit", 2, 10),
    ("group.share.partition.max.record.locks", 100, 10_000),
    ("group.share.min.partition.max.record.locks", 100, 10_000),
    ("group.share.max.partition.max.record.locks", 100, 10_000),
)


def _check_share_settings(values: Mapping[str, Any]) -> None:
    """Kafka's ShareGroupConfig checks: the lock duration, delivery count limit and record
    locks per partition within their ranges and within their min/max settings (a group's
    overrides are checked against the same bounds,
    :meth:`samsa.broker.dynamic_config.DynamicConfigs.check_group`)."""
    def value(name: str) -> int:
        return int(values.get(name, _DEFAULTS[name]))

    for name, least, most in _SHARE_RANGES:
        if not least <= value(name) <= most:
            raise ConfigError(f"{name}: must be between {least} and {most}, got {value(name)}")
    for kind in ("record.lock.duration.ms", "delivery.count.limit", "partition.max.record.locks"):
        name, low, high = (f"group.share.{kind}", f"group.share.min.{kind}",
                           f"group.share.max.{kind}")
        if value(high) < value(low):
            raise ConfigError(f"{high} ({value(high)}) must be greater than or equal to {low} "
                              f"({value(low)})")
        if value(name) < value(low):
            raise ConfigError(f"{name} ({value(name)}) must be greater than or equal to {low} "
                              f"({value(low)})")
        if value(name) > value(high):
            raise ConfigError(f"{name} ({value(name)}) must be less than or equal to {high} "
                              f"({value(high)})")


def _check_authorizer_settings(values: Mapping[str, Any]) -> None:
    """A known ``authorizer.class.name`` and principals in ``super.users`` and
    ``console.principal``."""
    from samsa.security.acl import parse_super_users
    from samsa.security.authorizer import AUTHORIZER_CLASSES
    from samsa.security.principal import KafkaPrincipal

    try:
        KafkaPrincipal.parse(str(values.get("console.principal", "User:ANONYMOUS")))
    except ValueError as exc:
        raise ConfigError(f"console.principal: {exc}") from None

    name = values.get("authorizer.class.name") or ""
    if name and name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: unknown authorizer {name!r}; samsa serves "
                          + " and ".join(sorted(AUTHORIZER_CLASSES)) + " (Kafka's ACLs)")
    try:
        parse_super_users(values.get("super.users"))
    except ValueError as exc:
        raise ConfigError(f"super.users: {exc}") from None


def parse_assignments(pairs: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings (from ``--config``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java-style properties file (``key=value`` lines, ``#`` comments)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    lines = [ln.strip() for ln in text.splitlines()]
    return parse_assignments(ln for ln in lines if ln and not ln.startswith(("#", "!")))
