"""What the polls of ``Consumer`` and ``ShareConsumer`` share: the wakeup flag with the
condition a poll waits on, and the key and value deserializers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from samsa.client.clock import Clock
from samsa.client.errors import WakeupError

__all__ = ["Waker", "deserialize"]


class _Record(Protocol):
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


R = TypeVar("R", bound=_Record)


class Waker:
    """``wakeup()`` from any thread makes the poll raise :class:`WakeupError`; answers
    from the network thread :meth:`notify` the poll waiting in :meth:`wait`."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.flag = False

    def wakeup(self) -> None:
        self.flag = True
        self.notify()

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def take(self) -> bool:
        """True (once) if ``wakeup()`` was called since the last check."""
        if self.flag:
            self.flag = False
            return True
        return False

    def check(self) -> None:
        """Raise :class:`WakeupError` (once) if ``wakeup()`` was called."""
        if self.take():
            raise WakeupError("wakeup() called")

    def wait(self, clock: Clock, seconds: float, ready: Callable[[], bool]) -> None:
        """Wait up to ``seconds`` unless ``ready()`` or woken."""
        with self.cond:
            if not ready() and not self.flag:
                clock.wait(self.cond, seconds)


def deserialize(records: list[R], key: Callable[[bytes], Any] | None,
                value: Callable[[bytes], Any] | None) -> list[R]:
    """``records`` with their keys and values through the deserializers (None: as is)."""
    if key is None and value is None:
        return records
    return [r._replace(key=key(r.key) if key and r.key is not None else r.key,  # type: ignore[attr-defined]
                       value=value(r.value) if value and r.value is not None else r.value)
            for r in records]
