"""The local engine: one node, everything in its data directory (``samsa serve --data-dir``).

* partitions: segment logs of :mod:`samsa.log` (:mod:`.partition`), fsynced by group
  commit (:mod:`.flusher`);
* topics: ``topics.json`` and a directory per partition (:mod:`.topics`);
* producer ids: blocks reserved in ``producer-ids`` (:mod:`.producer_ids`);
* ACLs and SCRAM credentials: files of :mod:`samsa.security`;
* dynamic configs: ``dynamic-configs.json`` (:mod:`.configs`);
* leadership: this node leads every partition at epoch 0 and coordinates every group
  (:class:`SingleNode`).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.broker.config import BrokerConfig
from samsa.broker.storage import (
    ClusterStatus,
    ConfigStore,
    Leadership,
    Node,
    NodeInfo,
    PartitionStore,
    ProducerIds,
    ShareStates,
    TopicStore,
)
from samsa.security.authorizer import AclStore, FileAclStore
from samsa.security.credentials import CredentialStore, FileStore
from samsa.storage.local.configs import LocalConfigStore
from samsa.storage.local.flusher import Flusher
from samsa.storage.local.partition import LocalPartition
from samsa.storage.local.producer_ids import ProducerIdAllocator
from samsa.storage.local.topics import LocalTopicStore

__all__ = ["LocalConfigStore", "LocalEngine", "LocalPartition", "LocalTopicStore", "SingleNode"]


class SingleNode:
    """The :class:`~samsa.broker.storage.Leadership` of a node alone."""

    leases = False

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node: Node | None = None

    def live_nodes(self) -> list[NodeInfo]:
        if self.node is not None:
            return [self.node.self_info()]
        config = self.config
        return [NodeInfo(config.node_id, config.advertised_host, config.advertised_port,
                         config.rack)]

    def leader(self, store: PartitionStore) -> tuple[int, int]:
        return self.config.node_id, 0

    def leader_error(self, store: PartitionStore, current_leader_epoch: int) -> ErrorCode:
        return ErrorCode.none

    async def confirm(self, store: PartitionStore) -> bool:
        return True

    def status(self) -> ClusterStatus | None:
        return None


class LocalEngine:
    """The :class:`~samsa.broker.storage.Engine` over one data directory."""

    def __init__(self, config: BrokerConfig) -> None:
        data_dir = config.data_dir
        self.flusher = Flusher()
        self.topics: TopicStore = LocalTopicStore(data_dir, self.flusher)
        self.producer_ids: ProducerIds = ProducerIdAllocator(data_dir / "producer-ids")
        self.single = SingleNode(config)
        self.leadership: Leadership = self.single
        self.acls: AclStore = FileAclStore(data_dir)
        self.credentials: CredentialStore = FileStore(data_dir)
        self.configs: ConfigStore = LocalConfigStore(data_dir)
        self.share_states: ShareStates | None = None

    async def open(self, node: Node) -> None:
        self.single.node = node

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def close(self) -> None:
        self.flusher.close()
