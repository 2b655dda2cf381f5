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
