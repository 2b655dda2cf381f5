"""The workload's faults: a nemesis injects one (``fault``) and undoes them all (``heal``).

* :class:`KillBroker`: kill -9 of a single broker, healed by a restart on its port;
* :class:`KillCoordinatorNode`: on a three-node cluster over PostgreSQL, kill -9 of the node
  whose lease holds the ``__transaction_state`` shard of one of the run's transactional
  ids, healed by restarting every killed node (same id and port) and waiting until every
  lease is held again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from samsa.broker.topics import TRANSACTION_TOPIC
from samsa.coordinator.hashing import partition_for
from tests.brokerproc import BrokerProcess
from tests.cluster.test_cluster_clients import Cluster


class Nemesis(Protocol):
    @property
    def bootstrap(self) -> str:
        """The clients' ``bootstrap.servers``."""
        ...

    def fault(self, rng: random.Random) -> str:
        """Inject a fault; returns what it did."""
        ...

    def heal(self) -> str:
        """Undo every fault (restart what was killed); returns what it did."""
        ...


@dataclass
class KillBroker:
    broker: BrokerProcess

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def fault(self, rng: random.Random) -> str:
        self.broker.kill()
        return "kill -9 broker"

    def heal(self) -> str:
        if self.broker.alive():
            return "broker up"
        self.broker.start()
        return "restart broker"


@dataclass
class KillCoordinatorNode:
    cluster: Cluster
    transactional_ids: tuple[str, ...]
    txn_partitions: int

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def fault(self, rng: random.Random) -> str:
        tid = rng.choice(self.transactional_ids)
        node = self.cluster.owner(TRANSACTION_TOPIC, partition_for(tid, self.txn_partitions))
        self.cluster.nodes[node].kill()
        return f"kill -9 node {node} (coordinator of {tid})"

    def heal(self) -> str:
        dead = sorted(i for i, n in self.cluster.nodes.items() if not n.alive())
        self.cluster.restart_killed()
        return f"restart nodes {dead}" if dead else "nodes up"
