"""Three cluster nodes for transaction tests (tests/cluster/test_cluster_transactions.py,
and any checker that kills nodes under transactional clients): the configuration and where
a transactional id's coordinator runs. Kill or pause a node with ``cluster.nodes[id]``
(:class:`~tests.cluster.nodes.ClusterNodeProcess`: ``kill`` is SIGKILL), bring it back
with ``cluster.restart_killed()``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from samsa.broker.topics import TRANSACTION_TOPIC
from samsa.coordinator.hashing import partition_for
from tests.cluster.test_cluster_clients import Cluster, three_nodes

TXN_PARTITIONS = 3
CONFIG = {"transaction.state.log.num.partitions": str(TXN_PARTITIONS)}


@contextlib.contextmanager
def txn_cluster(root: Path, dsn: str, config: dict[str, str] | None = None
                ) -> Iterator[Cluster]:
    """Nodes 1-3 over ``dsn`` with every lease held, ``__transaction_state`` of
    :data:`TXN_PARTITIONS` partitions (created by the first transactional client)."""
    with three_nodes(root, dsn, {**CONFIG, **(config or {})}) as c:
        yield c


def coordinator_node(cluster: Cluster, tid: str) -> int:
    """The node holding ``tid``'s ``__transaction_state`` shard, as the database says."""
    return cluster.owner(TRANSACTION_TOPIC, partition_for(tid, TXN_PARTITIONS))
