"""A fake :class:`~samsa.client.clock.Clock` and network for unit tests of the driver."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.client.clock import Waitable
from samsa.client.future import Future
from samsa.client.metadata import Cluster


class FakeClock:
    """Time moves only when the code under test sleeps or waits in vain, or the test
    calls :meth:`advance`; ``pauses`` records every sleep and every wait that timed out."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start
        self.pauses: list[float] = []

    def now(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.time += max(0.0, seconds)

    def wait(self, waitable: Waitable, seconds: float) -> bool:
        if waitable.wait(0):
            return True
        self.sleep(seconds)
        return bool(waitable.wait(0))


@dataclass(frozen=True)
class Sent:
    """One request the driver sent."""

    dest: Any
    api_key: int
    body: Mapping[str, Any]
    timeout_ms: float | None


Responder = Callable[[Mapping[str, Any]], Any]
"""Answers a request body with a response (or raises: the request fails)."""


class FakeNet:
    """Records requests; answers those of an API with a responder at once, leaves the
    others unanswered (their futures never resolve)."""

    def __init__(self, request_timeout_ms: int = 30000) -> None:
        self.request_timeout = request_timeout_ms / 1000
        self.sent: list[Sent] = []
        self.responders: dict[int, Responder] = {}
        self.addresses: dict[Any, tuple[str, int]] = {}
        self.failures: dict[Any, float] = {}
        """dest -> when its connection last failed (what :meth:`last_failure` reports)."""
        self.futures: list[tuple[Any, Future[Any]]] = []
        self.closed = False

    def send(self, dest: Any, api_key: int, body: Mapping[str, Any], *,
             timeout_ms: float | None = None, expect_response: bool = True) -> Future[Any]:
        self.sent.append(Sent(dest, api_key, body, timeout_ms))
        fut: Future[Any] = Future()
        self.futures.append((dest, fut))
        responder = self.responders.get(api_key)
        if responder is not None:
            try:
                fut.success(responder(body))
            except Exception as exc:
                fut.failure(exc)
        return fut

    def set_address(self, dest: Any, host: str, port: int) -> None:
        self.addresses[dest] = (host, port)

    def in_flight(self, dest: Any) -> int:
        return sum(1 for d, fut in self.futures if d == dest and not fut.done())

    def last_failure(self, dest: Any) -> float | None:
        return self.failures.get(dest)

    def apis(self) -> list[int]:
        return [s.api_key for s in self.sent]


class FakeMetadata:
    """Just enough of :class:`~samsa.client.metadata.Metadata` for the driver: one topic
    ``t`` with ``partitions`` partitions; ``refreshes`` records each refresh's topics."""

    def __init__(self, net: FakeNet, partitions: int = 3) -> None:
        self.net = net
        self.cluster = Cluster(brokers={0: ("h", 9)},
                               partitions={"t": dict.fromkeys(range(partitions), 0)})
        self.refreshes: list[frozenset[str] | None] = []

    def any_node(self) -> object:
        return ("bootstrap", 0)

    def refresh(self, topics: Collection[str] | None, timeout_s: float = 30.0,
                allow_auto_create: bool = True) -> Cluster:
        self.refreshes.append(None if topics is None else frozenset(topics))
        return self.cluster
