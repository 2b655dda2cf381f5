"""A metadata refresh against a real broker gets past a bootstrap node that hangs."""

from __future__ import annotations

from collections.abc import Callable

from samsa import TopicPartition
from samsa.client.metadata import Metadata
from samsa.client.net import NetworkClient
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.proxy import FaultProxy, Swallow


def test_refresh_gets_past_a_node_that_never_answers_metadata(
        broker: BrokerProcess, topic: Callable[[int], str]) -> None:
    """Bootstrap: a proxy that swallows Metadata (a hung node: it accepts the connection
    and answers ApiVersions), then the broker. Each refresh is bounded by the request
    timeout, as in the Spark reader, so waiting that long on the hung node would fail it.
    Fresh clients until one asked the hung node first (each picks at random)."""
    name = topic(1)
    proxy = FaultProxy().start(("127.0.0.1", broker.port))
    proxy.always(ApiKey.METADATA, Swallow())
    try:
        for _ in range(40):
            net = NetworkClient("hung-node", request_timeout_ms=6000)
            try:
                metadata = Metadata(net, [proxy.address, broker.bootstrap])
                cluster = metadata.refresh([name], 6.0, allow_auto_create=False)
            finally:
                net.close()
            assert cluster.leader(TopicPartition(name, 0)) is not None
            if proxy.seen[ApiKey.METADATA]:
                break
        assert proxy.seen[ApiKey.METADATA] == 1
    finally:
        proxy.close()
