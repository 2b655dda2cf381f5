"""``samsa.Admin``: topics, partitions, configs, ACLs, groups and offsets (blocking calls)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.assignors import decode_assignment, decode_subscription
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import KafkaTimeoutError, error_for
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey, Connector, NetworkClient
from samsa.client.offsets import EARLIEST, LATEST, list_offsets
from samsa.client.security import DEFAULTS as SECURITY_DEFAULTS
from samsa.client.security import client_security
from samsa.security.acl import (
    ANY_ACL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["Admin", "ConfigEntry", "FeatureMetadata", "GroupDescription", "GroupListing",
           "MemberDescription", "ProducerState", "SharePartitionOffset"]

_ids = itertools.count(1)
_COORDINATOR_RETRY = frozenset({ErrorCode.coordinator_load_in_progress,
                                ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
_UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
_CONFIG_SOURCES = {1: "topic", 2: "dynamic-broker", 3: "dynamic-default-broker",
                   4: "static-broker", 5: "default", 6: "dynamic-broker-logger", 8: "group"}
RESOURCE_TYPES = {"topic": 2, "broker": 4, "group": 32}
"""Config resource types by name (Kafka's ConfigResource.Type ids)."""


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a resource as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: str
    """topic, group, dynamic-broker, dynamic-default-broker, static-broker or default."""
    read_only: bool
    synonyms: tuple[tuple[str, str | None, str], ...]
    """Every layer that sets it, highest precedence first: (name, value, source)."""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    """Subscribed topics (decoded consumer-protocol metadata; empty for other types)."""
    assignment: tuple[TopicPartition, ...]
    #: consumer (KIP-848) and share (KIP-932) groups: the member's epoch; consumer groups
    #: only: its target assignment
    member_epoch: int = -1
    target_assignment: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    """The classic protocol chosen, or a consumer group's server-side assignor."""
    members: tuple[MemberDescription, ...]
    error_code: int = 0
    group_type: str = "classic"
    #: consumer and share groups only: the group epoch and the target assignment's epoch
    group_epoch: int = -1
    assignment_epoch: int = -1


@dataclass(frozen=True)
class GroupListing:
    """One group as ListGroups names it."""

    group_id: str
    state: str
    group_type: str
    """classic, consumer, share, streams (from ListGroups v5; older brokers: classic)."""
    protocol_type: str
    coordinator: int
    """The node that listed it (its coordinator)."""


@dataclass(frozen=True)
class SharePartitionOffset:
    """One share partition as DescribeShareGroupOffsets gives it (KIP-932, KIP-1226)."""

    start_offset: int
    """The share-partition start offset (SPSO); -1 when the group never read it."""
    lag: int
    """Records between SPSO and the high watermark not yet acknowledged or archived (-1:
    unknown, e.g. a v0 broker or a partition never read)."""
    leader_epoch: int


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id as ListTransactions names it (KIP-664)."""

    transactional_id: str
    producer_id: int
    state: str
    """Kafka's state name: Empty, Ongoing, PrepareCommit, CompleteCommit, ..."""


@dataclass(frozen=True)
class TransactionDescription:
    """One transactional id as DescribeTransactions describes it (KIP-664)."""

    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int | None
    """When the open transaction started; None without one."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    """An active producer of a partition as DescribeProducers describes it (KIP-664)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int | None
    """The first offset of its open transaction there; None without one."""


@dataclass(frozen=True)
class FeatureMetadata:
    """A broker's cluster features (KIP-584), as Java's ``Admin.describeFeatures`` gives
    them."""

    finalized: dict[str, int]
    """Feature -> the level the cluster runs (a feature that is off, level 0, is absent)."""
    finalized_epoch: int | None
    """The features' epoch; None when the broker does not know it (-1 on the wire)."""
    supported: dict[str, tuple[int, int]]
    """Feature -> (min, max) level the broker can run."""


class Admin:
    """Administrative operations against a cluster."""

    def __init__(self, bootstrap_servers: str | list[str] = "localhost:9092",
                 client_id: str | None = None, request_timeout_ms: int = 30000,
                 clock: Clock = SYSTEM_CLOCK, connector: Connector | None = None,
                 **security: Any) -> None:
        """``security``: TLS and SASL settings (:data:`samsa.client.security.DEFAULTS`);
        ``clock``: every deadline and pause of the admin client (tests pass a fake one);
        ``connector``: opens connections in place of TCP (a broker's console connects
        in-process, see :data:`samsa.client.net.Connector`)."""
        unknown = set(security) - set(SECURITY_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown admin config {sorted(unknown)}")
        self.client_id = client_id or f"samsa-admin-{next(_ids)}"
        self.timeout_ms = request_timeout_ms
        self._net = NetworkClient(self.client_id, request_timeout_ms,
                                  security=client_security({**SECURITY_DEFAULTS, **security}),
                                  connector=connector)
        self._clock = clock
        self._metadata = Metadata(self._net, bootstrap_servers, clock=clock)
        #: API key -> the version to use of the APIs asked once (ListGroups,
        #: ConsumerGroupDescribe, ShareGroupDescribe; -1: none)
        self._versions: dict[int, int] = {}

    def close(self) -> None:
        self._net.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _any(self, api: int, body: Mapping[str, Any]) -> Any:
        return self._net.call(self._metadata.any_node(), api, body, timeout_ms=self.timeout_ms)

    # ---- topics -------------------------------------------------------------------------

    def create_topics(self, topics: Mapping[str, int] | Iterable[str], *,
                      configs: Mapping[str, Mapping[str, str]] | None = None,
                      replication_factor: int = 1, exist_ok: bool = False) -> None:
        """Create topics (name -> partition count, or names with the broker default)."""
        counts = dict(topics) if isinstance(topics, Mapping) else dict.fromkeys(topics, -1)
        configs = configs or {}
        body = {"topics": [{"name": name, "num_partitions": n,
                            "replication_factor": replication_factor, "assignments": [],
                            "configs": [{"name": k, "value": v}
                                        for k, v in configs.get(name, {}).items()]}
                           for name, n in counts.items()],
                "timeout": self.timeout_ms, "validate_only": False}
        resp = self._any(ApiKey.CREATE_TOPICS, body)
        for t in resp.topics:
            code = int(t.error_code)
            if code and not (exist_ok and code == ErrorCode.topic_already_exists):
                raise error_for(code, f"create topic {t.name}: {t.error_message or ''}")
        self._wait_for(set(counts), present=True)

    def delete_topics(self, topics: Iterable[str]) -> None:
        names = list(topics)
        resp = self._any(ApiKey.DELETE_TOPICS, {"topic_names": names, "topics":
                                                [{"name": n} for n in names],
                                                "timeout": self.timeout_ms})
        for r in resp.responses:
            if int(r.error_code):
                raise error_for(int(r.error_code), f"delete topic {r.name}")
        self._wait_for(set(names), present=False)

    def create_partitions(self, new_totals: Mapping[str, int]) -> None:
        """Grow topics to the given total partition counts."""
        body = {"topics": [{"name": t, "count": n, "assignments": None}
                           for t, n in new_totals.items()],
                "timeout": self.timeout_ms, "validate_only": False}
        resp = self._any(ApiKey.CREATE_PARTITIONS, body)
        for r in resp.results:
            if int(r.error_code):
                raise error_for(int(r.error_code), f"create partitions {r.name}")

    def list_topics(self) -> dict[str, int]:
        """Topic -> partition count (internal topics excluded)."""
        cluster = self._metadata.refresh(None, allow_auto_create=False)
        return {t: len(p) for t, p in cluster.partitions.items() if t not in cluster.internal}

    def describe_topics(self, topics: Iterable[str]) -> dict[str, dict[int, int]]:
        """Topic -> partition -> leader node id; raises for a topic that does not exist."""
        names = set(topics)
        cluster = self._metadata.refresh(names, allow_auto_create=False)
        for name in sorted(names):
            if name in cluster.topic_errors or name not in cluster.partitions:
                raise error_for(cluster.topic_errors.get(name, _UNKNOWN_TOPIC), f"topic {name}")
        return {name: dict(cluster.partitions[name]) for name in names}

    def describe_topic_configs(self, topic: str) -> dict[str, tuple[str | None, str]]:
        """A topic's configs (DescribeConfigs v1): name -> (value, source)."""
        resp = self._any(ApiKey.DESCRIBE_CONFIGS, {
            "__version__": 1, "include_synonyms": False,
            "resources": [{"resource_type": 2, "resource_name": topic,
                           "configuration_keys": None}]})
        result = resp.results[0]
        if int(result.error_code):
            raise error_for(int(result.error_code), f"describe configs {topic}")
        return {c.name: (c.value, _CONFIG_SOURCES.get(int(c.config_source), "unknown"))
                for c in result.configs}

    def describe_configs(self, resource_type: str, name: str) -> dict[str, ConfigEntry]:
        """Configs of a ``topic``, ``broker`` (node id, or "" for cluster-wide dynamic
        defaults) or ``group`` (DescribeConfigs v3, with synonyms)."""
        resp = self._any(ApiKey.DESCRIBE_CONFIGS, {
            "__version__": 3, "include_synonyms": True, "include_documentation": False,
            "resources": [{"resource_type": RESOURCE_TYPES[resource_type],
                           "resource_name": name, "configuration_keys": None}]})
        result = resp.results[0]
        if int(result.error_code):
            raise error_for(int(result.error_code),
                            f"describe configs {resource_type} {name!r}: "
                            f"{result.error_message or ''}")

        def source(code: Any) -> str:
            return _CONFIG_SOURCES.get(int(code), "unknown")

        return {c.name: ConfigEntry(c.name, c.value, source(c.config_source), bool(c.read_only),
                                    tuple((s.name, s.value, source(s.source))
                                          for s in c.synonyms))
                for c in result.configs}

    def alter_configs(self, resource_type: str, name: str, *,
                      set: Mapping[str, str] | None = None, delete: Iterable[str] = (),
                      append: Mapping[str, str] | None = None,
                      subtract: Mapping[str, str] | None = None,
                      validate_only: bool = False) -> None:
        """Change some configs of a resource (IncrementalAlterConfigs); the others stay."""
        ops = [(k, 0, v) for k, v in (set or {}).items()] + [(k, 1, None) for k in delete]
        ops += [(k, 2, v) for k, v in (append or {}).items()]
        ops += [(k, 3, v) for k, v in (subtract or {}).items()]
        self._alter(ApiKey.INCREMENTAL_ALTER_CONFIGS, resource_type, name, [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops], validate_only)

    def replace_configs(self, resource_type: str, name: str, configs: Mapping[str, str], *,
                        validate_only: bool = False) -> None:
        """Make ``configs`` all of a resource's configs (legacy AlterConfigs)."""
        self._alter(ApiKey.ALTER_CONFIGS, resource_type, name,
                    [{"name": k, "value": v} for k, v in configs.items()], validate_only)

    def _alter(self, api: int, resource_type: str, name: str, configs: list[dict[str, Any]],
               validate_only: bool) -> None:
        resp = self._any(api, {
            "__version__": 1 if api == ApiKey.INCREMENTAL_ALTER_CONFIGS else 2,
            "validate_only": validate_only,
            "resources": [{"resource_type": RESOURCE_TYPES[resource_type],
                           "resource_name": name, "configs": configs}]})
        result = resp.responses[0]
        if int(result.error_code):
            raise error_for(int(result.error_code), f"alter configs {resource_type} {name!r}: "
                                                    f"{result.error_message or ''}")

    # ---- ACLs -----------------------------------------------------------------------------

    def create_acls(self, acls: Iterable[AclBinding]) -> None:
        """Add ACLs (CreateAcls); an ACL that exists already is fine. Raises the first
        refusal (e.g. SECURITY_DISABLED without an authorizer, INVALID_REQUEST)."""
        acls = list(acls)
        resp = self._any(ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": int(b.resource_type), "resource_name": b.name,
             "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
             "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission)} for b in acls]})
        for b, r in zip(acls, resp.results, strict=True):
            if int(r.error_code):
                raise error_for(int(r.error_code), f"create ACL {b}: {r.error_message or ''}")

    def describe_acls(self, acl_filter: AclBindingFilter = ANY_ACL) -> list[AclBinding]:
        """The ACLs a filter matches (DescribeAcls), sorted."""
        resp = self._any(ApiKey.DESCRIBE_ACLS, _filter_body(acl_filter))
        if int(resp.error_code):
            raise error_for(int(resp.error_code), f"describe ACLs: {resp.error_message or ''}")
        return sorted(_binding(r.resource_type, r.resource_name, r.pattern_type, a)
                      for r in resp.resources for a in r.acls)

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Remove the ACLs each filter matches (DeleteAcls); returns those removed."""
        resp = self._any(ApiKey.DELETE_ACLS, {"filters": [_filter_body(f) for f in filters]})
        removed = []
        for r in resp.filter_results:
            if int(r.error_code):
                raise error_for(int(r.error_code), f"delete ACLs: {r.error_message or ''}")
            removed += [_binding(m.resource_type, m.resource_name, m.pattern_type, m)
                        for m in r.matching_acls]
        return sorted(set(removed))

    def _wait_for(self, topics: set[str], present: bool, timeout: float = 10.0) -> None:
        deadline = self._clock.now() + timeout
        while self._clock.now() < deadline:
            cluster = self._metadata.refresh(topics, allow_auto_create=False)
            there = [(cluster.partition_count(t) or 0) > 0 for t in topics]
            if all(there) if present else not any(there):
                return
            self._clock.sleep(0.05)

    # ---- offsets --------------------------------------------------------------------------

    def list_offsets(self, partitions: Mapping[TopicPartition, str | int], *,
                     read_committed: bool = False) -> dict[TopicPartition, tuple[int, int]]:
        """tp -> "earliest" | "latest" | timestamp ms; returns tp -> (offset, timestamp).
        ``read_committed``: "latest" is the last stable offset (Kafka's
        ``ListOffsetsOptions(IsolationLevel.READ_COMMITTED)``)."""
        specs = {TopicPartition(*tp): EARLIEST if v == "earliest" else
                 LATEST if v == "latest" else int(v) for tp, v in partitions.items()}
        topics = {tp.topic for tp in specs}
        cluster = self._metadata.refresh(topics, allow_auto_create=False)
        for name in sorted(topics):  # like Kafka's AdminClient: no topic is created here
            if name in cluster.topic_errors or name not in cluster.partitions:
                raise error_for(cluster.topic_errors.get(name, _UNKNOWN_TOPIC), f"topic {name}")
        return list_offsets(self._metadata, specs, self.timeout_ms / 1000,
                            allow_auto_create=False, read_committed=read_committed)

    # ---- groups -------------------------------------------------------------------------

    def _coordinator(self, group_id: str, key_type: int = 0) -> Any:
        """The coordinator of a group (``key_type`` 0) or transactional id (1)."""
        deadline = self._clock.now() + self.timeout_ms / 1000
        while True:
            resp = self._any(ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": key_type,
                                                       "coordinator_keys": [group_id]})
            if hasattr(resp, "coordinators"):
                c = resp.coordinators[0]
                code, node, host, port = int(c.error_code), int(c.node_id), c.host, int(c.port)
            else:
                code, node, host, port = (int(resp.error_code), int(resp.node_id), resp.host,
                                          int(resp.port))
            if code == ErrorCode.none:
                dest = ("coordinator" if key_type == 0 else "txn-coordinator", node)
                self._net.set_address(dest, host, port)
                return dest
            if code not in _COORDINATOR_RETRY or self._clock.now() > deadline:
                raise error_for(code, f"FindCoordinator {group_id}")
            self._clock.sleep(0.1)

    def _group_call(self, group_id: str, api: int, body: Mapping[str, Any],
                    error_of: Any = lambda r: int(r.error_code)) -> Any:
        deadline = self._clock.now() + self.timeout_ms / 1000
        while True:
            resp = self._net.call(self._coordinator(group_id), api, body,
                                  timeout_ms=self.timeout_ms)
            code = error_of(resp)
            if code not in _COORDINATOR_RETRY:
                return resp
            if self._clock.now() > deadline:
                raise KafkaTimeoutError(f"group {group_id}: coordinator not available")
            self._clock.sleep(0.1)

    def find_coordinator(self, group_id: str) -> tuple[int, str, int]:
        """The group's coordinator: (node id, host, port)."""
        dest = self._coordinator(group_id)
        host, port = self._net.address(dest) or ("", -1)
        return int(dest[1]), host, port

    def list_groups(self, states: Iterable[str] = ()) -> dict[str, str]:
        """Group id -> group state ("Stable", "Empty", ...)."""
        resp = self._any(ApiKey.LIST_GROUPS, {"states_filter": list(states)})
        if int(resp.error_code):
            raise error_for(int(resp.error_code), "ListGroups")
        return {g.group_id: getattr(g, "group_state", "") for g in resp.groups}

    # ---- transactions (KIP-664) ---------------------------------------------------------

    def list_transactions(self, states: Iterable[str] = ()) -> list[TransactionListing]:
        """Every transactional id of every node (in ``states`` only, when given): like
        ListGroups, ListTransactions goes to every broker."""
        out: list[TransactionListing] = []
        for node in self._brokers():
            resp = self._net.call(node, ApiKey.LIST_TRANSACTIONS,
                                  {"state_filters": list(states), "producer_id_filters": [],
                                   "duration_filter": -1}, timeout_ms=self.timeout_ms)
            if int(resp.error_code):
                raise error_for(int(resp.error_code), "ListTransactions")
            out.extend(TransactionListing(t.transactional_id, int(t.producer_id),
                                          t.transaction_state)
                       for t in resp.transaction_states)
        return sorted(out, key=lambda t: t.transactional_id)

    def describe_transactions(self, transactional_ids: Iterable[str]
                              ) -> dict[str, TransactionDescription]:
        """Each id's transaction, from its coordinator; raises the error of an id that
        has none (TransactionalIdNotFoundError) or may not be described."""
        out: dict[str, TransactionDescription] = {}
        for tid in transactional_ids:
            resp = self._net.call(self._coordinator(tid, key_type=1),
                                  ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]},
                                  timeout_ms=self.timeout_ms)
            (t,) = resp.transaction_states
            if int(t.error_code):
                raise error_for(int(t.error_code), f"DescribeTransactions {tid}")
            start = int(t.transaction_start_time)  # ms (samsa.protocol.kio_fixes)
            out[tid] = TransactionDescription(
                t.transaction_state, int(t.producer_id), int(t.producer_epoch),
                int(t.transaction_timeout.total_seconds() * 1000),
                None if start < 0 else start,
                tuple(TopicPartition(tp.topic, int(p)) for tp in t.topics
                      for p in tp.partitions))
        return out

    def _leader(self, tp: TopicPartition) -> int:
        """The partition's leader, from fresh metadata; raises the topic's error."""
        cluster = self._metadata.refresh({tp.topic}, allow_auto_create=False)
        leader = cluster.leader(tp)
        if leader is None:
            raise error_for(cluster.topic_errors.get(tp.topic, _UNKNOWN_TOPIC),
                            f"{tp.topic}-{tp.partition}")
        return leader

    def describe_producers(self, partitions: Iterable[TopicPartition]
                           ) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, from its leader (Kafka's
        ``describeProducers``): how a hanging transaction is found."""
        out: dict[TopicPartition, list[ProducerState]] = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            resp = self._net.call(self._leader(tp), ApiKey.DESCRIBE_PRODUCERS, {"topics": [
                {"name": tp.topic, "partition_indexes": [tp.partition]}]},
                timeout_ms=self.timeout_ms)
            p = resp.topics[0].partitions[0]
            if int(p.error_code):
                raise error_for(int(p.error_code), f"DescribeProducers {tp.topic}-{tp.partition}")
            out[tp] = [ProducerState(
                int(s.producer_id), int(s.producer_epoch), int(s.last_sequence),
                int(s.last_timestamp), int(s.coordinator_epoch),
                None if int(s.current_txn_start_offset) < 0 else int(s.current_txn_start_offset))
                for s in p.active_producers]
        return out

    def abort_transaction(self, partition: TopicPartition, producer_id: int,
                          producer_epoch: int, coordinator_epoch: int = 0) -> None:
        """Write an abort marker for the producer's open transaction on ``partition``
        (WriteTxnMarkers to its leader; Kafka's ``abortTransaction``, KIP-664): closes a
        hanging transaction its coordinator does not know. Needs CLUSTER_ACTION."""
        tp = TopicPartition(*partition)
        resp = self._net.call(self._leader(tp), ApiKey.WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": False, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}]}]},
            timeout_ms=self.timeout_ms)
        code = int(resp.markers[0].topics[0].partitions[0].error_code)
        if code:
            raise error_for(code, f"WriteTxnMarkers {tp.topic}-{tp.partition}")

    def _brokers(self) -> list[object]:
        """Every broker, from fresh metadata (the bootstrap server if none is known)."""
        self._metadata.refresh([], allow_auto_create=False)
        return [*sorted(self._metadata.cluster.brokers)] or [self._metadata.any_node()]

    def list_group_listings(self, types: Iterable[str] = (),
                            states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of the cluster with its state and type (only of ``types`` / in
        ``states`` when given, e.g. ``types=["share"]`` as Kafka's ``listShareGroups``):
        ListGroups goes to every broker, each listing the groups it coordinates (as
        Kafka's ``listGroups``)."""
        found: dict[str, GroupListing] = {}
        types = list(types)
        # v5 names each group's type and filters by type (older brokers: every group classic)
        version = self._version(ApiKey.LIST_GROUPS, 5)
        for node in self._brokers():
            resp = self._net.call(node, ApiKey.LIST_GROUPS,
                                  {"__version__": version, "states_filter": list(states),
                                   "types_filter": types}, timeout_ms=self.timeout_ms)
            if int(resp.error_code):
                raise error_for(int(resp.error_code), "ListGroups")
            for g in resp.groups:
                if types and (getattr(g, "group_type", "") or "classic") not in types:
                    continue
                found[g.group_id] = GroupListing(
                    g.group_id, getattr(g, "group_state", "") or "",
                    getattr(g, "group_type", "") or "classic", g.protocol_type,
                    node if isinstance(node, int) else -1)
        return sorted(found.values(), key=lambda g: g.group_id)

    def _api_versions(self) -> Any:
        """One broker's ApiVersions answer (v4 where served; v3 lists fewer features)."""
        resp = self._any(ApiKey.API_VERSIONS, {"client_software_name": "samsa",
                                               "client_software_version": "0"})
        if int(resp.error_code):
            raise error_for(int(resp.error_code), "ApiVersions")
        return resp

    def describe_features(self) -> FeatureMetadata:
        """The supported and finalized features of a broker (``kafka-features describe``)."""
        resp = self._api_versions()
        epoch = int(getattr(resp, "finalized_features_epoch", -1))
        return FeatureMetadata(
            finalized={f.name: int(f.max_version_level)
                       for f in getattr(resp, "finalized_features", ())},
            finalized_epoch=epoch if epoch >= 0 else None,
            supported={f.name: (int(f.min_version), int(f.max_version))
                       for f in getattr(resp, "supported_features", ())})

    def _version(self, api: ApiKey, newest: int) -> int:
        """The version to use of ``api``: the broker's newest, at most ``newest`` (-1 when
        the broker has none); asked once."""
        if api not in self._versions:
            resp = self._api_versions()
            ranges = {int(k.api_key): int(k.max_version) for k in resp.api_keys}
            top = ranges.get(api)
            self._versions[api] = -1 if top is None else min(top, newest)
        return self._versions[api]

    def _describe_version(self, api: ApiKey) -> int:
        """The version to use of ConsumerGroupDescribe or ShareGroupDescribe (at most 1;
        -1 when the broker has none)."""
        return self._version(api, 1)

    def _describe_modern_group(self, gid: str, api: ApiKey,
                               group_type: str) -> GroupDescription | None:
        """A KIP-848 consumer group (ConsumerGroupDescribe) or a KIP-932 share group
        (ShareGroupDescribe); None when the broker answers GROUP_ID_NOT_FOUND (a group of
        another type) or has no such API, as Kafka's admin does."""
        version = self._describe_version(api)
        if version < 0:
            return None
        resp = self._group_call(gid, api, {
            "__version__": version, "group_ids": [gid], "include_authorized_operations": False},
            lambda r: int(r.groups[0].error_code))
        g = resp.groups[0]
        code = int(g.error_code)
        if code == ErrorCode.group_id_not_found:
            return None

        def tps(assignment: Any) -> tuple[TopicPartition, ...]:
            return tuple(sorted(TopicPartition(t.topic_name, int(p))
                                for t in assignment.topic_partitions for p in t.partitions))

        members = tuple(MemberDescription(
            m.member_id, getattr(m, "instance_id", None), m.client_id, m.client_host,
            tuple(m.subscribed_topic_names), tps(m.assignment), int(m.member_epoch),
            tps(m.target_assignment) if hasattr(m, "target_assignment") else None)
            for m in g.members)
        return GroupDescription(g.group_id, g.group_state, group_type, g.assignor_name,
                                members, code, group_type, int(g.group_epoch),
                                int(g.assignment_epoch))

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Describe groups; consumer-protocol members are decoded (topics, assignment).

        KIP-848 consumer groups come from ConsumerGroupDescribe (type ``consumer``, group
        and member epochs, target assignments), KIP-932 share groups from ShareGroupDescribe
        (type ``share``); classic groups from DescribeGroups."""
        out = {}
        for gid in group_ids:
            modern = (self._describe_modern_group(gid, ApiKey.CONSUMER_GROUP_DESCRIBE, "consumer")
                      or self._describe_modern_group(gid, ApiKey.SHARE_GROUP_DESCRIBE, "share"))
            if modern is not None:
                out[gid] = modern
                continue
            resp = self._group_call(gid, ApiKey.DESCRIBE_GROUPS,
                                    {"groups": [gid], "include_authorized_operations": False},
                                    lambda r: int(r.groups[0].error_code))
            g = resp.groups[0]
            members = []
            for m in g.members:
                topics: tuple[str, ...] = ()
                assignment: tuple[TopicPartition, ...] = ()
                if g.protocol_type == "consumer":
                    try:
                        if m.member_metadata:
                            topics = decode_subscription(bytes(m.member_metadata)).topics
                        if m.member_assignment:
                            assignment = tuple(TopicPartition(*tp) for tp in decode_assignment(
                                bytes(m.member_assignment)).partitions)
                    except Exception:  # foreign or corrupt metadata: leave undecoded
                        pass
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                                 m.client_host, topics, assignment))
            out[gid] = GroupDescription(g.group_id, g.group_state, g.protocol_type,
                                        g.protocol_data, tuple(members), int(g.error_code))
        return out

    def describe_share_group(self, group_id: str) -> GroupDescription:
        """A share group (ShareGroupDescribe, KIP-932): state, epochs, members and their
        assignments. Raises GroupIdNotFoundError when the group is not a share group (or
        does not exist) and UnsupportedVersionError when the broker has no share groups."""
        version = self._describe_version(ApiKey.SHARE_GROUP_DESCRIBE)
        if version < 0:
            raise error_for(ErrorCode.unsupported_version, "ShareGroupDescribe")
        found = self._describe_modern_group(group_id, ApiKey.SHARE_GROUP_DESCRIBE, "share")
        if found is None or found.state == "Dead":
            raise error_for(ErrorCode.group_id_not_found,
                            f"group {group_id} is not a share group")
        if found.error_code:
            raise error_for(found.error_code, f"describe share group {group_id}")
        return found

    def describe_share_group_offsets(
            self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, SharePartitionOffset]:
        """Each share partition's start offset and lag (DescribeShareGroupOffsets v1,
        KIP-1226); every partition the group has state for when ``partitions`` is None.
        Raises the group's error, or a partition's."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            topics = [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]
        resp = self._group_call(group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, {
            "__version__": 1, "groups": [{"group_id": group_id, "topics": topics}]},
            lambda r: int(r.groups[0].error_code))
        g = resp.groups[0]
        if int(g.error_code):
            raise error_for(int(g.error_code), f"describe share group offsets {group_id}: "
                                               f"{g.error_message or ''}")
        out = {}
        for t in g.topics:
            for p in t.partitions:
                if int(p.error_code):
                    raise error_for(int(p.error_code),
                                    f"share group offsets {t.topic_name}-{p.partition_index}")
                out[TopicPartition(t.topic_name, int(p.partition_index))] = SharePartitionOffset(
                    int(p.start_offset), int(getattr(p, "lag", -1)), int(p.leader_epoch))
        return dict(sorted(out.items()))

    def alter_share_group_offsets(self, group_id: str,
                                  offsets: Mapping[TopicPartition, int]) -> None:
        """Set share partitions' start offsets (AlterShareGroupOffsets; the group must have
        no members: GroupNotEmptyError)."""
        by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
        for tp, off in offsets.items():
            by_topic[tp.topic].append({"partition_index": tp.partition,
                                       "start_offset": int(off)})
        resp = self._group_call(group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, {
            "__version__": 0, "group_id": group_id,
            "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]})
        if int(resp.error_code):
            raise error_for(int(resp.error_code), f"alter share group offsets {group_id}: "
                                                  f"{resp.error_message or ''}")
        for t in resp.responses:
            for p in t.partitions:
                if int(p.error_code):
                    raise error_for(int(p.error_code),
                                    f"alter share offset {t.topic_name}-{p.partition_index}")

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> None:
        """Forget a share group's state of whole topics (DeleteShareGroupOffsets; the group
        must have no members)."""
        resp = self._group_call(group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS, {
            "__version__": 0, "group_id": group_id, "topics": [{"topic_name": t} for t in topics]})
        if int(resp.error_code):
            raise error_for(int(resp.error_code), f"delete share group offsets {group_id}: "
                                                  f"{resp.error_message or ''}")
        for t in resp.responses:
            if int(t.error_code):
                raise error_for(int(t.error_code), f"delete share offsets {t.topic_name}")

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        for gid in group_ids:
            resp = self._group_call(gid, ApiKey.DELETE_GROUPS, {"groups_names": [gid]},
                                    lambda r: int(r.results[0].error_code))
            code = int(resp.results[0].error_code)
            if code:
                raise error_for(code, f"delete group {gid}")

    def remove_group_members(self, group_id: str, member_ids: Iterable[str],
                             reason: str = "removed by an administrator") -> None:
        """Remove dynamic members from a group, as if each had left (LeaveGroup v3+ on their
        behalf); their next heartbeat or commit fails with UNKNOWN_MEMBER_ID."""
        members = [{"member_id": m, "group_instance_id": None, "reason": reason}
                   for m in member_ids]
        resp = self._group_call(group_id, ApiKey.LEAVE_GROUP, {
            "group_id": group_id, "member_id": "", "members": members})
        codes = [int(resp.error_code)] + [int(m.error_code) for m in resp.members]
        code = next((c for c in codes if c), 0)
        if code:
            raise error_for(code, f"remove members of {group_id}")

    def list_consumer_group_offsets(self, group_id: str,
                                    partitions: Iterable[TopicPartition] | None = None
                                    ) -> dict[TopicPartition, int]:
        """Committed offsets of a group (all partitions when ``partitions`` is None)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        resp = self._group_call(group_id, ApiKey.OFFSET_FETCH,
                                {"group_id": group_id, "topics": topics,
                                 "require_stable": False})
        if int(resp.error_code):
            raise error_for(int(resp.error_code), "OffsetFetch")
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if int(p.committed_offset) >= 0:
                    out[TopicPartition(t.name, int(p.partition_index))] = int(p.committed_offset)
        return out

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[TopicPartition, int]) -> None:
        """Commit offsets for an (empty) group, as ``kafka-consumer-groups --reset-offsets``."""
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, off in offsets.items():
            by_topic[tp.topic].append({"partition_index": tp.partition,
                                       "committed_offset": int(off),
                                       "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = self._group_call(group_id, ApiKey.OFFSET_COMMIT, body,
                                lambda r: max((int(p.error_code) for t in r.topics
                                               for p in t.partitions), default=0))
        for t in resp.topics:
            for p in t.partitions:
                if int(p.error_code):
                    raise error_for(int(p.error_code), f"commit {t.name}-{p.partition_index}")

    def delete_consumer_group_offsets(self, group_id: str,
                                      partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append({"partition_index": tp.partition})
        body = {"group_id": group_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        resp = self._group_call(group_id, ApiKey.OFFSET_DELETE, body)
        if int(resp.error_code):
            raise error_for(int(resp.error_code), "OffsetDelete")
        for t in resp.topics:
            for p in t.partitions:
                if int(p.error_code):
                    raise error_for(int(p.error_code), f"delete offset {t.name}")




def _filter_body(f: AclBindingFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
            "host_filter": f.host, "operation": int(f.operation),
            "permission_type": int(f.permission)}


def _binding(rtype: int, name: str, pattern: int, entry: Any) -> AclBinding:
    return AclBinding(ResourceType(rtype), name, PatternType(pattern), entry.principal,
                      entry.host, AclOperation(entry.operation),
                      AclPermissionType(entry.permission_type))
