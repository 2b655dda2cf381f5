"""The one clock of the consumer's driver: read it, sleep on it, wait on it.

Every deadline and every pause of the group drivers (:mod:`samsa.client.group`), of
:class:`~samsa.client.consumer.Consumer`, :class:`~samsa.client.producer.Producer` and
:class:`~samsa.client.admin.Admin` goes through a :class:`Clock`, so a test can run them on
a fake one (``tests/client/fakeclock.py``). The network thread keeps its own monotonic time:
request deadlines are enforced by the socket loop, not by the driver.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "Waitable"]


class Waitable(Protocol):
    """Anything with ``wait(timeout) -> bool``: an Event, a held Condition, a Future."""

    def wait(self, timeout: float | None = None) -> bool: ...


class Clock(Protocol):
    """Monotonic seconds, and blocking that counts on the same time."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences mean anything)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``."""
        ...

    def wait(self, waitable: Waitable, seconds: float) -> bool:
        """Block until ``waitable`` is set or ``seconds`` pass; True if it was set."""
        ...


class SystemClock:
    """:func:`time.monotonic` and real blocking."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait(self, waitable: Waitable, seconds: float) -> bool:
        return bool(waitable.wait(seconds))


SYSTEM_CLOCK = SystemClock()
