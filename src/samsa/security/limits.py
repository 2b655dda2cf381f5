"""Limits that keep bad or greedy clients from exhausting a broker, as Kafka's settings.

* :class:`ConnectionLimits`: ``max.connections`` (and ``listener.name.<l>.max.connections``),
  ``max.connections.per.ip`` with ``max.connections.per.ip.overrides`` (``HOST:COUNT,...``).
  A connection over a limit is closed as soon as it is accepted (Kafka closes per-IP
  excess the same way; for the broker-wide limit Kafka stops accepting until a slot frees).
* :class:`RequestMemory`: ``queued.max.request.bytes``: request bytes read but not yet
  answered, over every connection; past the limit connections stop reading.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from samsa.security.lists import config_list

UNLIMITED = 2_147_483_647


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``HOST:COUNT,...`` -> {host: count}."""
    out: dict[str, int] = {}
    for item in config_list(text):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: expected HOST:COUNT, got "
                             f"{item!r}")
        out[host.strip().strip("[]")] = int(count)
    return out


class ConnectionLimits:
    """Counts open connections by listener and by client address."""

    def __init__(self, max_total: int = UNLIMITED, per_ip: int = UNLIMITED,
                 overrides: Mapping[str, int] | None = None,
                 per_listener: Mapping[str, int] | None = None) -> None:
        self.max_total = max_total
        self.per_ip = per_ip
        self.overrides = dict(overrides or {})
        self.per_listener = dict(per_listener or {})
        self.total = 0
        self.by_ip: Counter[str] = Counter()
        self.by_listener: Counter[str] = Counter()
        self.refused = 0
        self.accepted = 0

    def admit(self, listener: str, ip: str) -> str | None:
        """Count a new connection; or, over a limit, the reason it is refused."""
        ip_limit = self.overrides.get(ip, self.per_ip)
        reason = None
        if self.by_ip[ip] >= ip_limit:
            reason = f"max.connections.per.ip ({ip_limit}) reached for {ip}"
        elif self.total >= self.max_total:
            reason = f"max.connections ({self.max_total}) reached"
        elif self.by_listener[listener] >= self.per_listener.get(listener, UNLIMITED):
            reason = f"max.connections of listener {listener} reached"
        if reason is not None:
            self.refused += 1
            return reason
        self.accepted += 1
        self.total += 1
        self.by_ip[ip] += 1
        self.by_listener[listener] += 1
        return None

    def release(self, listener: str, ip: str) -> None:
        self.total -= 1
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]
        self.by_listener[listener] -= 1


class RequestMemory:
    """Bytes of requests read and not answered yet (``limit`` <= 0: no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    @property
    def full(self) -> bool:
        return 0 < self.limit < self.used

    def take(self, size: int) -> None:
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size
