"""Prometheus metrics of a broker, served by ``samsa serve --metrics-port N``.

The request path only bumps plain counters (:meth:`BrokerMetrics.observe_request`: a few
dict operations and a bisect per request); everything else (log end offsets, groups by
state, members, committed offsets and lag, shard load times, transactions by state and the
records past each partition's last stable offset, share partitions' records by state, lag
and share sessions) is read from the broker's state when Prometheus scrapes. Share-group
events (lock expiries, records released for redelivery, archives, dead letters) are counted
in :class:`ShareCounters`, which the share runtime bumps. Rebalances are counted by
:meth:`BrokerMetrics.observe_group`, which the group runtime calls after each group request
or timer: it compares the group's state with the last one seen.

The HTTP server (:mod:`samsa.console.server`, beside the web console) runs on the broker's
event loop, so a scrape never races the loop's mutations of broker state.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from samsa.coordinator.queries import REBALANCING_STATE_NAMES, STATE_NAMES
from samsa.protocol.api_keys import ApiKey
from samsa.security.acl import AclOperation, ResourceType
from samsa.share import RecordState, ShareUpdate
from samsa.share.stats import SharePartitionStats, partition_stats
from samsa.transactions.coordinator import STATE_NAMES as TXN_STATE_NAMES

if TYPE_CHECKING:
    import uuid

    from samsa.broker.topics import TopicManager
    from samsa.coordinator import Coordinator
    from samsa.security.authorizer import Authorizer
    from samsa.security.limits import ConnectionLimits
    from samsa.share import Acquired, DurableState, SharePartition
    from samsa.transactions import TxnValue


class _Groups(Protocol):
    coordinator: Coordinator | None


class _Transactions(Protocol):
    def transactions(self) -> list[tuple[str, TxnValue]]: ...


@dataclass
class ShareCounters:
    """Share-group events since the broker started (KIP-932), bumped by
    :class:`samsa.broker.shares.ShareRuntime` and read at scrape."""

    lock_expiries: int = 0
    """Acquisition locks that expired (their records became available again or archived)."""
    released: int = 0
    """Records made available again after a delivery (RELEASE, an expired lock, a member
    gone): each is delivered again, with a higher delivery count."""
    archived: int = 0
    """Records rejected or archived at the delivery limit."""
    dead_letters: int = 0
    """Records copied to a dead-letter topic (KIP-1191)."""
    redelivered: int = 0
    """Records acquired again: delivered with a delivery count above 1 (ShareFetch)."""

    def observe(self, update: ShareUpdate, dead: int) -> None:
        """A share partition's durable state changed by ``update``; ``dead`` records were
        rejected or archived at the limit."""
        self.released += sum(b.last_offset - b.first_offset + 1 for b in update.batches
                             if b.state is RecordState.AVAILABLE and b.delivery_count > 0)
        self.archived += dead

    def observe_acquired(self, acquired: Iterable[Acquired]) -> None:
        """A ShareFetch acquired ``acquired``: those past their first delivery are
        redeliveries."""
        self.redelivered += sum(a.last_offset - a.first_offset + 1 for a in acquired
                                if a.delivery_count > 1)


class _Shares(Protocol):
    @property
    def counters(self) -> ShareCounters: ...

    @property
    def partitions(self) -> Mapping[tuple[str, uuid.UUID, int], SharePartition]: ...

    @property
    def sessions(self) -> Mapping[tuple[str, str], object]: ...

    @property
    def stored(self) -> Mapping[tuple[str, uuid.UUID, int], DurableState]: ...


class Broker(Protocol):
    """What a scrape reads of the broker."""

    limits: ConnectionLimits
    groups: _Groups
    transactions: _Transactions
    shares: _Shares
    authorizer: Authorizer | None
    topics: TopicManager

__all__ = ["API_NAMES", "BrokerMetrics", "ShareCounters", "share_partitions"]

log = logging.getLogger("samsa.metrics")

API_NAMES = {int(key): key.title for key in ApiKey}
"""The ``api`` label of the request metrics: Kafka's name of each API key."""
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)
REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
GROUP_STATES = STATE_NAMES
"""Classic and consumer (KIP-848) group states."""
_REBALANCING = REBALANCING_STATE_NAMES


class _Histogram:
    """Bucket counts without locks (the event loop is the only writer)."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, float(running)))
        return out


class BrokerMetrics:
    """Counters fed by the broker, and a collector reading its state at scrape time."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        #: seconds on a monotonic scale (rebalance durations)
        self.clock = clock if clock is not None else time.monotonic
        self.latency: dict[int, _Histogram] = {}
        self.bytes_in: dict[int, int] = {}
        self.bytes_out: dict[int, int] = {}
        self.rebalances: dict[str, int] = {}
        self.rebalance_seconds = _Histogram(REBALANCE_BUCKETS)
        self.shard_load_seconds: dict[int, float] = {}
        self.denied: dict[tuple[int, int, int], int] = {}
        """(API key, resource type, operation) -> authorization denials."""
        self._seen: dict[str, tuple[str, int]] = {}
        self._rebalance_started: dict[str, float] = {}
        self.authentications = 0
        self.authentication_failures = 0
        self.broker: Broker | None = None

    # ---- hooks -----------------------------------------------------------------------------

    def observe_request(self, api_key: int, seconds: float, bytes_in: int,
                        bytes_out: int) -> None:
        """One request handled (called by ``Connection._handle``)."""
        hist = self.latency.get(api_key)
        if hist is None:
            hist = self.latency[api_key] = _Histogram(LATENCY_BUCKETS)
        hist.observe(seconds)
        self.bytes_in[api_key] = self.bytes_in.get(api_key, 0) + bytes_in
        self.bytes_out[api_key] = self.bytes_out.get(api_key, 0) + bytes_out

    def observe_denied(self, api_key: int, resource_type: int, operation: int) -> None:
        """The authorizer denied a request an operation on a resource."""
        key = (api_key, resource_type, operation)
        self.denied[key] = self.denied.get(key, 0) + 1

    def observe_group(self, coordinator: Coordinator, group_id: str | None) -> None:
        """Note a group's state after a request or timer; counts rebalances and times them."""
        if not group_id:
            return
        group = coordinator.group_state(group_id)
        now = (group[0].value, group[1]) if group is not None else ("Dead", -1)
        before = self._seen.get(group_id)
        if now == before:
            return
        self._seen[group_id] = now
        was_rebalancing = before is not None and before[0] in _REBALANCING
        if now[0] in _REBALANCING:
            if not was_rebalancing:
                self._rebalance_started[group_id] = self.clock()
                self.rebalances[group_id] = self.rebalances.get(group_id, 0) + 1
            return
        started = self._rebalance_started.pop(group_id, None)
        if started is None and before is not None and group is not None and now[1] > before[1]:
            # A whole rebalance inside one call (the last member left): count it, zero time.
            started = self.clock()
            self.rebalances[group_id] = self.rebalances.get(group_id, 0) + 1
        if started is not None:
            self.rebalance_seconds.observe(self.clock() - started)
        if group is None:
            self._seen.pop(group_id, None)

    def observed(self, group_id: str) -> tuple[str, int] | None:
        """The state name and generation last noted of a group (None: not tracked, or
        forgotten once gone)."""
        return self._seen.get(group_id)

    def shard_loaded(self, partition: int, seconds: float) -> None:
        self.shard_load_seconds[partition] = seconds

    # ---- scrape ----------------------------------------------------------------------------

    def _connection_metrics(self) -> Iterator[Metric]:
        auth = CounterMetricFamily("samsa_authentications", "SASL authentications by outcome",
                                   labels=["outcome"])
        auth.add_metric(["success"], self.authentications)
        auth.add_metric(["failure"], self.authentication_failures)
        yield auth
        if self.broker is not None:
            limits = self.broker.limits
            open_ = GaugeMetricFamily("samsa_connections", "Open connections per listener",
                                      labels=["listener"])
            for name, n in sorted(limits.by_listener.items()):
                open_.add_metric([name], n)
            yield open_
            yield CounterMetricFamily("samsa_connections_accepted",
                                      "Connections accepted since the broker started",
                                      value=limits.accepted)
            yield CounterMetricFamily("samsa_connections_refused",
                                      "Connections closed at once by a connection limit",
                                      value=limits.refused)

    def collect(self) -> Iterator[Metric]:
        """Every metric family (prometheus_client's collector protocol)."""
        yield from self._request_metrics()
        yield from self._authorization_metrics()
        yield from self._connection_metrics()
        if self.broker is not None:
            yield from self._log_metrics(self.broker)
            coordinator = self.broker.groups.coordinator
            if coordinator is not None:
                yield from self._group_metrics(self.broker, coordinator)
            yield from self._share_metrics(self.broker)
        rebalances = CounterMetricFamily(
            "samsa_group_rebalances", "Rebalances per group since the broker started",
            labels=["group"])
        for gid, n in sorted(self.rebalances.items()):
            rebalances.add_metric([gid], n)
        yield rebalances
        duration = HistogramMetricFamily(
            "samsa_group_rebalance_duration_seconds",
            "Time from a rebalance's start until the group is Stable or Empty again")
        duration.add_metric([], self.rebalance_seconds.buckets(), self.rebalance_seconds.total)
        yield duration
        load = GaugeMetricFamily("samsa_coordinator_shard_load_seconds",
                                 "Time the last load of each coordinator shard took",
                                 labels=["partition"])
        for part, secs in sorted(self.shard_load_seconds.items()):
            load.add_metric([str(part)], secs)
        yield load

    def _request_metrics(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("samsa_requests", "Requests handled per API",
                                       labels=["api"])
        latency = HistogramMetricFamily("samsa_request_latency_seconds",
                                        "Time from a request's arrival to its encoded response",
                                        labels=["api"])
        bytes_in = CounterMetricFamily("samsa_request_bytes", "Request bytes received per API",
                                       labels=["api"])
        bytes_out = CounterMetricFamily("samsa_response_bytes", "Response bytes sent per API",
                                        labels=["api"])
        for key in sorted(self.latency):
            name = [API_NAMES.get(key, str(key))]
            hist = self.latency[key]
            requests.add_metric(name, hist.count)
            latency.add_metric(name, hist.buckets(), hist.total)
            bytes_in.add_metric(name, self.bytes_in.get(key, 0))
            bytes_out.add_metric(name, self.bytes_out.get(key, 0))
        yield from (requests, latency, bytes_in, bytes_out)

    def _authorization_metrics(self) -> Iterator[Metric]:
        denied = CounterMetricFamily(
            "samsa_authorization_denials", "Operations the authorizer denied, per API, "
            "resource type and operation", labels=["api", "resource_type", "operation"])
        for (api, rtype, op), n in sorted(self.denied.items()):
            denied.add_metric([API_NAMES.get(api, str(api)), ResourceType(rtype).name,
                               AclOperation(op).name], n)
        yield denied
        authorizer = self.broker.authorizer if self.broker is not None else None
        if authorizer is not None:
            yield GaugeMetricFamily("samsa_acls", "ACLs the authorizer holds",
                                    value=len(authorizer.index))

    def _log_metrics(self, broker: Broker) -> Iterator[Metric]:
        end = GaugeMetricFamily("samsa_log_end_offset", "Log end offset per partition",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("samsa_log_start_offset", "Log start offset per partition",
                                  labels=["topic", "partition"])
        unstable = GaugeMetricFamily(
            "samsa_log_unstable_records", "Records between the last stable offset and the "
            "log end offset (open transactions), per partition that has any",
            labels=["topic", "partition"])
        for topic in broker.topics:
            for part in topic.partitions:
                labels = [topic.name, str(part.index)]
                log_end = part.log.log_end_offset
                end.add_metric(labels, log_end)
                start.add_metric(labels, part.log.log_start_offset)
                if part.log.producers.ongoing:
                    unstable.add_metric(
                        labels, log_end - part.log.producers.last_stable_offset(log_end))
        yield from (end, start, unstable)
        by_state = GaugeMetricFamily(
            "samsa_transactions", "Transactional ids per transaction state", labels=["state"])
        counts = dict.fromkeys(TXN_STATE_NAMES.values(), 0)
        for _, txn in broker.transactions.transactions():
            counts[TXN_STATE_NAMES[txn.state]] += 1
        for state, n in counts.items():
            by_state.add_metric([state], n)
        yield by_state

    def _group_metrics(self, broker: Broker, coordinator: Coordinator) -> Iterator[Metric]:
        by_state = GaugeMetricFamily("samsa_groups", "Groups per state", labels=["state"])
        by_type = GaugeMetricFamily("samsa_groups_by_type",
                                    "Groups per type (classic, consumer, share)", labels=["type"])
        members = GaugeMetricFamily("samsa_group_members", "Members per group",
                                    labels=["group"])
        generation = GaugeMetricFamily("samsa_group_generation", "Generation per group",
                                       labels=["group"])
        info = GaugeMetricFamily("samsa_group_info", "A group's state, protocol and leader",
                                 labels=["group", "state", "protocol_type", "protocol",
                                         "leader"])
        committed = GaugeMetricFamily("samsa_group_committed_offset",
                                      "Committed offset per group and partition",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("samsa_group_lag",
                                "Log end offset minus committed offset per group and partition",
                                labels=["group", "topic", "partition"])
        counts = dict.fromkeys(GROUP_STATES, 0)
        types = {"classic": 0, "consumer": 0, "share": 0}
        for group in coordinator.group_summaries():
            gid, state = group.group_id, group.state.value
            counts[state] = counts.get(state, 0) + 1
            types[group.group_type] = types.get(group.group_type, 0) + 1
            members.add_metric([gid], group.members)
            generation.add_metric([gid], group.generation)
            info.add_metric([gid, state, group.protocol_type, group.protocol, group.leader], 1)
            for offset in coordinator.committed_offsets(gid):
                labels = [gid, offset.topic, str(offset.partition)]
                committed.add_metric(labels, offset.offset)
                part = broker.topics.partition(offset.topic, offset.partition)
                if part is not None:
                    lag.add_metric(labels, part.log.log_end_offset - offset.offset)
        for state, n in counts.items():
            by_state.add_metric([state], n)
        for kind, n in types.items():
            by_type.add_metric([kind], n)
        yield from (by_state, by_type, members, generation, info, committed, lag)

    def _share_metrics(self, broker: Broker) -> Iterator[Metric]:
        """Share partitions this node leads (records by state, in flight, lag), share
        sessions, and the share event counters."""
        shares = broker.shares
        labels = ["group", "topic", "partition"]
        records = GaugeMetricFamily(
            "samsa_share_partition_records", "Records of a share partition's in-flight "
            "window by state (available, acquired, acknowledged, archived)",
            labels=[*labels, "state"])
        in_flight = GaugeMetricFamily(
            "samsa_share_partition_in_flight_records",
            "Records between a share partition's start and end offsets (SPSO..SPEO)",
            labels=labels)
        start = GaugeMetricFamily("samsa_share_partition_start_offset",
                                  "A share partition's start offset (SPSO)", labels=labels)
        lag = GaugeMetricFamily(
            "samsa_share_group_lag", "Records between a share partition's start offset and "
            "the log end not yet acknowledged or archived (KIP-1226)", labels=labels)
        for group_id, topic, index, stats in share_partitions(shares, broker.topics):
            names = [group_id, topic, str(index)]
            start.add_metric(names, stats.start_offset)
            lag.add_metric(names, stats.lag)
            if stats.in_flight is not None:
                in_flight.add_metric(names, stats.in_flight)
                for state in ("available", "acquired", "acknowledged", "archived"):
                    records.add_metric([*names, state], getattr(stats, state))
        yield from (records, in_flight, start, lag)
        yield GaugeMetricFamily("samsa_share_sessions", "Open share sessions (KIP-932)",
                                value=len(shares.sessions))
        c = shares.counters
        yield CounterMetricFamily("samsa_share_lock_expiries",
                                  "Acquisition locks that expired", value=c.lock_expiries)
        yield CounterMetricFamily(
            "samsa_share_records_released", "Records made available again after a delivery "
            "(released, lock expired, member gone), to be delivered again", value=c.released)
        yield CounterMetricFamily(
            "samsa_share_records_archived",
            "Records rejected or archived at the delivery limit", value=c.archived)
        yield CounterMetricFamily(
            "samsa_share_dead_letters", "Records copied to a share group's dead-letter "
            "topic (KIP-1191)", value=c.dead_letters)
        yield CounterMetricFamily(
            "samsa_share_records_redelivered", "Records acquired again by a share fetch "
            "(delivery count above 1)", value=c.redelivered)

    def registry(self) -> CollectorRegistry:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return registry


def share_partitions(shares: _Shares, topics: TopicManager, group_id: str | None = None
                     ) -> Iterator[tuple[str, str, int, SharePartitionStats]]:
    """(group, topic, partition, stats) of the share partitions a node's share runtime
    holds (of one group, when given), in order; partitions of deleted topics are skipped.
    The metrics and the broker's console read them."""
    keys = {k for k in (*shares.partitions, *shares.stored)
            if group_id is None or k[0] == group_id}
    for key in sorted(keys, key=lambda k: (k[0], str(k[1]), k[2])):
        gid, topic_id, index = key
        topic = topics.by_id(topic_id)
        part = None if topic is None else topics.partition(topic.name, index)
        if topic is None or part is None:
            continue
        yield gid, topic.name, index, partition_stats(
            shares.partitions.get(key), shares.stored.get(key), part.log.log_end_offset)
