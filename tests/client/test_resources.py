"""Clients give back what they took when they fail: no network thread left running by a
constructor that raised, no socket left for the garbage collector (whose ResourceWarning
would fail whichever test happens to run then)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

from samsa import Admin, Consumer, Producer, ShareConsumer
from samsa.client.errors import KafkaConnectionError
from samsa.client.metadata import Metadata
from samsa.client.net import NetworkClient
from samsa.protocol.api_keys import ApiKey


def _net_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("samsa-net-")}


@pytest.mark.parametrize("make", [
    lambda servers: Admin(servers),
    lambda servers: Consumer(bootstrap_servers=servers),
    lambda servers: Producer(bootstrap_servers=servers),
    lambda servers: ShareConsumer(bootstrap_servers=servers, group_id="g"),
], ids=["admin", "consumer", "producer", "share-consumer"])
def test_a_bad_bootstrap_fails_clearly_and_stops_the_network_thread(
        make: Callable[[str], Any]) -> None:
    before = _net_threads()
    with pytest.raises(ValueError, match="'broker' is not host:port"):
        make("127.0.0.1:9092,broker")
    left = _net_threads() - before
    for t in left:
        t.join(5)
    assert not [t for t in left if t.is_alive()]


class _Unusable(socket.socket):
    """A socket that cannot be made non-blocking (as a connector's socket closed under it)."""

    def setblocking(self, flag: bool) -> None:
        raise OSError("setblocking refused")


def test_a_connection_that_fails_while_being_set_up_closes_its_socket() -> None:
    made: list[socket.socket] = []

    def connector(address: tuple[str, int]) -> socket.socket:
        sock = _Unusable(socket.AF_INET, socket.SOCK_STREAM)
        made.append(sock)
        return sock

    net = NetworkClient("resources-test", connector=connector)
    try:
        net.set_address("n", "127.0.0.1", 9)
        with pytest.raises(KafkaConnectionError):
            net.call("n", ApiKey.METADATA, {"topics": []}, timeout_ms=2000)
    finally:
        net.close()
    assert made and all(s.fileno() == -1 for s in made)


def test_requests_sent_while_the_client_closes_fail_at_once() -> None:
    """A request queued as the network thread ends is failed ("client closed"), never left
    to its timeout: the console's sampler waited out 11 s per call at shutdown, and the
    process overran its SIGTERM grace period."""
    with socket.socket() as silent:  # accepts connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        for _ in range(20):
            net = NetworkClient("resources-test", request_timeout_ms=60_000)
            net.set_address("n", *silent.getsockname())
            futures: list[Any] = []
            closing = threading.Event()

            def spam(net: NetworkClient = net, futures: list[Any] = futures,
                     closing: threading.Event = closing) -> None:
                while not closing.is_set():
                    futures.append(net.send("n", ApiKey.METADATA, {"topics": []}))
                for _ in range(200):  # and just after
                    futures.append(net.send("n", ApiKey.METADATA, {"topics": []}))

            senders = [threading.Thread(target=spam) for _ in range(2)]
            for t in senders:
                t.start()
            closing.set()
            net.close()
            for t in senders:
                t.join()
            for f in futures:
                with pytest.raises(KafkaConnectionError):
                    f.result(5)


def test_a_metadata_refresh_of_a_closed_client_fails_at_once() -> None:
    """Not retried until its deadline (a closed console's sampler kept the process alive)."""
    net = NetworkClient("resources-test")
    metadata = Metadata(net, "127.0.0.1:9")
    net.close()
    with pytest.raises(KafkaConnectionError, match="client closed"):
        metadata.refresh(None, timeout_s=20)
