"""The cluster-feature table (samsa.broker.features): under every value of
group.coordinator.rebalance.protocols and transaction.version each finalized level is one
the broker supports, and a level-0 feature is left out of the finalized list (the wire
shape per ApiVersions version is tested over TCP in test_more_api_versions.py)."""

from __future__ import annotations

import pytest

from samsa.broker import features
from samsa.broker.config import BrokerConfig


@pytest.mark.parametrize("tv", [0, 1, 2])
@pytest.mark.parametrize("protocols", ["classic", "classic,consumer", "consumer,classic",
                                       "classic,consumer,share"])
def test_finalized_levels_are_supported(protocols: str, tv: int) -> None:
    config = BrokerConfig(values={"group.coordinator.rebalance.protocols": protocols,
                                  "transaction.version": tv})
    for f in features.FEATURES:
        assert f.min_level <= f.level(config) <= f.max_level, f.name
    on = "consumer" in protocols
    # share groups are on with share.version, finalized as in Kafka 4.2+
    assert features.finalized(config) == ({"group.version": 1} if on else {}) | {
        "share.version": 1} | ({"transaction.version": tv} if tv else {})

