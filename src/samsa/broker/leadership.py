"""Who leads what, for the handlers, as the engine's :class:`~samsa.broker.storage.Leadership`
says: this node alone (a single node leads every partition at epoch 0 and coordinates every
group) or a cluster's leases. Nodes are given with the address of the listener the request
came in on (Kafka answers per listener; a node without that listener is left out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from samsa.broker.partition import Partition
from samsa.broker.storage import NodeInfo
from samsa.broker.topics import OFFSETS_TOPIC, TRANSACTION_TOPIC

if TYPE_CHECKING:
    from samsa.broker.context import Services


def brokers(broker: Services, listener: str | None = None) -> list[NodeInfo]:
    """The live nodes (this one alone without a cluster), at ``listener``'s address."""
    nodes = broker.leadership.live_nodes()
    if listener is None:
        return nodes
    return [n for n in (node.at(listener) for node in nodes) if n is not None]


def controller_id(broker: Services) -> int:
    """The lowest live node id stands in for Kafka's controller."""
    return min(n.node_id for n in brokers(broker))


def leader(broker: Services, part: Partition) -> tuple[int, int]:
    """(leader node id or -1 when none is live, leader epoch)."""
    return broker.leadership.leader(part.log)


def leader_error(broker: Services, part: Partition, current_leader_epoch: int = -1) -> ErrorCode:
    """NOT_LEADER_OR_FOLLOWER on a node that does not lead ``part``; with the client's
    ``current_leader_epoch`` (-1: unknown), FENCED_LEADER_EPOCH when it is older than the
    leader's and UNKNOWN_LEADER_EPOCH when newer."""
    return broker.leadership.leader_error(part.log, current_leader_epoch)


def coordinator(broker: Services, group_id: str,
                listener: str | None = None) -> tuple[ErrorCode, NodeInfo | None]:
    """FindCoordinator: the node owning the group's shard. A single node answers from its
    shard's state; a cluster node names the shard's lease holder, COORDINATOR_NOT_AVAILABLE
    while no live node holds it (or it has no ``listener``)."""
    nodes = {n.node_id: n for n in brokers(broker, listener)}
    if not broker.leadership.leases:
        code = ErrorCode(broker.groups.coordinator_error(group_id))
        return code, (nodes[broker.config.node_id] if code == ErrorCode.none else None)
    return _lease_holder(broker, OFFSETS_TOPIC, broker.groups.partition_for(group_id), nodes)


def txn_coordinator(broker: Services, transactional_id: str,
                    listener: str | None = None) -> tuple[ErrorCode, NodeInfo | None]:
    """FindCoordinator for a transactional id: this node once its shard is loaded; a
    cluster node names the lease holder of the id's ``__transaction_state`` partition
    (COORDINATOR_NOT_AVAILABLE until the topic exists: the first request creates it)."""
    nodes = {n.node_id: n for n in brokers(broker, listener)}
    if broker.leadership.leases:
        index = broker.transactions.partition_for(transactional_id)
        if index is None:
            return ErrorCode.coordinator_not_available, None
        return _lease_holder(broker, TRANSACTION_TOPIC, index, nodes)
    code = ErrorCode(broker.transactions.coordinator_error(transactional_id))
    if code != ErrorCode.none:
        return code, None
    node = nodes.get(broker.config.node_id)
    return (ErrorCode.none, node) if node is not None else (
        ErrorCode.coordinator_not_available, None)


def _lease_holder(broker: Services, topic_name: str, index: int,
                  nodes: dict[int, NodeInfo]) -> tuple[ErrorCode, NodeInfo | None]:
    """The live node holding the lease of coordinator partition ``topic_name``-``index``."""
    topic = broker.topics.get(topic_name)
    if topic is None or index >= len(topic.partitions):
        return ErrorCode.coordinator_not_available, None
    node, _ = leader(broker, topic.partitions[index])
    if node < 0 or node not in nodes:
        return ErrorCode.coordinator_not_available, None
    return ErrorCode.none, nodes[node]
