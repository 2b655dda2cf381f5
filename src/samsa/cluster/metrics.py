"""Prometheus metrics of a cluster node: leases held, live nodes, lease changes."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from samsa.broker.storage import Leadership


class ClusterCollector:
    """Nothing on a single node; on a cluster node, its view of the leases."""

    def __init__(self, leadership: Leadership) -> None:
        self.leadership = leadership

    def collect(self) -> Iterator[Metric]:
        status = self.leadership.status()
        if status is None:
            return
        leases = GaugeMetricFamily("samsa_cluster_leases",
                                   "Leases this node holds, by kind", labels=["kind"])
        leases.add_metric(["partition"], status.partitions_held)
        leases.add_metric(["coordinator_shard"], status.shards_held)
        leases.add_metric(["transaction_coordinator_shard"], status.txn_shards_held)
        yield leases
        yield GaugeMetricFamily("samsa_cluster_live_nodes", "Live nodes of the cluster",
                                value=len(status.live_nodes))
        for name, doc, value in (
            ("claims", "Leases this node took (fresh, handed over or taken over)",
             status.claims),
            ("takeovers", "Leases taken over from a node that stopped renewing",
             status.takeovers),
            ("handoffs", "Leases this node handed over to another node", status.handoffs),
            ("lost", "Leases this node found moved or could not write under", status.lost),
        ):
            yield CounterMetricFamily(f"samsa_cluster_lease_{name}", doc, value=value)
