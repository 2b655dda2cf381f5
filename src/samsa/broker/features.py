"""Cluster features (KIP-584): the one table of what ApiVersions v3+ reports.

Each :class:`Feature` names the levels samsa serves (``min_level``-``max_level``, the
``SupportedFeatures`` of the answer) and the level a broker runs at under its config (the
``FinalizedFeatures``). To add a feature or raise one when samsa starts serving its next
level, edit :data:`FEATURES`; the ApiVersions handler answers from it.

How the answer is shaped follows Kafka 4.3's ``ApiVersionsResponse.Builder`` (checked
against kafka-clients 4.3.0):

* a finalized level of 0 means "off" and is left out of ``FinalizedFeatures``; an entry's
  min and max level are both the level;
* below ApiVersions v4 a supported range starting at 0 is left out (KAFKA-17011: clients
  before 3.9 refuse a minimum of 0), so a v3 answer lists only features whose minimum is 1+;
* error answers carry no features and epoch -1.

``metadata.version`` and ``kraft.version`` are not reported: they version KRaft's metadata
log and controller quorum, which samsa does not have, and no client gates on them (Java's
``Admin.describeFeatures`` and librdkafka take whatever features are listed).

The features epoch is the wall-clock millisecond the broker started (see
:attr:`samsa.broker.server.Broker.features_epoch`): the levels come from static config, so
they can change only across a restart, and Java's client keeps the finalized features of
the highest epoch it has seen, so a restart with other levels must give a higher epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from samsa.broker.config import BrokerConfig
from samsa.broker.handlers.consumer_group_heartbeat import consumer_protocol_enabled


@dataclass(frozen=True)
class Feature:
    name: str
    min_level: int
    max_level: int
    """The levels this broker can run: ``max_level`` is the newest samsa serves."""
    level: Callable[[BrokerConfig], int]
    """The finalized level under a broker config (0: off, not listed as finalized)."""
    about: str


def _off(_config: BrokerConfig) -> int:
    return 0


FEATURES: tuple[Feature, ...] = (
    Feature("group.version", 0, 1,
            lambda config: 1 if consumer_protocol_enabled(config) else 0,
            "1: KIP-848 consumer groups; 0 when group.coordinator.rebalance.protocols "
            "leaves out consumer"),
    Feature("share.version", 0, 1, lambda config: 1,
            "1: share groups (KIP-932), finalized by default as in Kafka 4.2+"),
    Feature("transaction.version", 0, 2, lambda config: int(config["transaction.version"]),
            "2: transactions v2 (KIP-890: partitions added implicitly, an epoch bump at "
            "every end); 0 and 1: v1 (samsa does not verify a v1 producer's partitions "
            "as Kafka's level 1 does); the transaction.version setting"),
)


def supported(api_version: int) -> list[tuple[str, int, int]]:
    """(name, min, max) of every feature an ApiVersions answer of ``api_version`` lists."""
    return [(f.name, f.min_level, f.max_level) for f in FEATURES
            if api_version >= 4 or f.min_level > 0]


CLUSTER_TRANSACTION_VERSION = 1
"""The highest ``transaction.version`` a cluster node finalizes: KIP-890's implicit adds
(Produce v12, TxnOffsetCommit v5) reach the partition leader's own coordinator, not the
node holding the transactional id's shard (docs/transactions-cluster.md)."""


def finalized(config: BrokerConfig, *, clustered: bool = False) -> dict[str, int]:
    """Name -> level of every feature that is on (level 1+) under ``config`` (on a node of
    a cluster when ``clustered``)."""
    levels = {f.name: f.level(config) for f in FEATURES}
    if clustered:
        levels["transaction.version"] = min(levels["transaction.version"],
                                            CLUSTER_TRANSACTION_VERSION)
    return {name: level for name, level in levels.items() if level > 0}
