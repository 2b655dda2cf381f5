"""Prometheus metrics of a cluster node: leases held, live nodes, lease changes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from samsa.broker.topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from samsa.broker.server import Broker


class ClusterCollector:
    """Nothing on a single node; on a cluster node, its view of the leases."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        node = self.broker.cluster
        if node is None:
            return
        by_pid = node.topics.by_pid
        shards = sum(1 for pid in node.owned
                     if pid in by_pid and by_pid[pid].topic == OFFSETS_TOPIC)
        leases = GaugeMetricFamily("samsa_cluster_leases",
                                   "Leases this node holds, by kind", labels=["kind"])
        leases.add_metric(["partition"], len(node.owned) - shards)
        leases.add_metric(["coordinator_shard"], shards)
        yield leases
        yield GaugeMetricFamily("samsa_cluster_live_nodes", "Live nodes of the cluster",
                                value=len(node.nodes))
        stats = node.stats
        for name, doc, value in (
            ("claims", "Leases this node took (fresh, handed over or taken over)", stats.claims),
            ("takeovers", "Leases taken over from a node that stopped renewing",
             stats.takeovers),
            ("handoffs", "Leases this node handed over to another node", stats.handoffs),
            ("lost", "Leases this node found moved or could not write under", stats.lost),
        ):
            yield CounterMetricFamily(f"samsa_cluster_lease_{name}", doc, value=value)
