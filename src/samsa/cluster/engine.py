"""The engine of a cluster node (``samsa serve --storage postgresql://...``): PostgreSQL's
stores (:class:`~samsa.storage.pg.engine.PgEngine`), led by the node's lease loop
(:class:`~samsa.cluster.node.ClusterNode`, the engine's
:class:`~samsa.broker.storage.Leadership`)."""

from __future__ import annotations

import asyncio

from samsa.broker.config import BrokerConfig
from samsa.broker.storage import (
    ConfigStore,
    Leadership,
    Node,
    ProducerIds,
    ShareStates,
    TopicStore,
)
from samsa.cluster.node import ClusterNode
from samsa.security.authorizer import AclStore
from samsa.security.credentials import CredentialStore
from samsa.storage.pg.engine import PgEngine


class ClusterEngine:
    """The :class:`~samsa.broker.storage.Engine` of one node of a cluster over ``dsn``."""

    def __init__(self, config: BrokerConfig, dsn: str) -> None:
        self.pg = PgEngine(dsn, config.node_id)
        self.node = ClusterNode(self.pg, config)
        self.topics: TopicStore = self.pg.topics
        self.producer_ids: ProducerIds = self.pg.producer_ids
        self.acls: AclStore = self.pg.acls
        self.credentials: CredentialStore = self.pg.credentials
        self.configs: ConfigStore = self.pg.configs
        self.leadership: Leadership = self.node
        self.share_states: ShareStates | None = self.pg.share_states

    async def open(self, node: Node) -> None:
        self.node.node = node
        await asyncio.get_running_loop().run_in_executor(None, self.pg.open)

    async def start(self) -> None:
        await self.node.start()

    async def stop(self) -> None:
        await self.node.stop()

    def close(self) -> None:
        self.pg.close()
