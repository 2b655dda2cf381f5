"""A small thread-safe future: resolved once, waited on, with done callbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from samsa.client.errors import KafkaTimeoutError

T = TypeVar("T")

__all__ = ["Future"]


class Future(Generic[T]):
    """Result of an asynchronous request. Callbacks run on the thread that resolves it."""

    __slots__ = ("_callbacks", "_done", "_event", "_exception", "_value")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._done = False
        self._value: Any = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] = []

    def done(self) -> bool:
        return self._done

    def succeeded(self) -> bool:
        return self._done and self._exception is None

    def failed(self) -> bool:
        return self._done and self._exception is not None

    def success(self, value: T) -> None:
        """Resolve with ``value`` (ignored if already resolved)."""
        if self._done:
            return
        self._value = value
        self._finish()

    def failure(self, exc: BaseException) -> None:
        """Resolve with an exception (ignored if already resolved)."""
        if self._done:
            return
        self._exception = exc
        self._finish()

    def _finish(self) -> None:
        self._done = True
        self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def add_done_callback(self, cb: Callable[[Future[T]], None]) -> None:
        """Call ``cb(future)`` when resolved (now, if it already is)."""
        if self._done:
            cb(self)
        else:
            self._callbacks.append(cb)
            if self._done and cb in self._callbacks:  # resolved concurrently
                self._callbacks.remove(cb)
                cb(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until resolved; False on timeout."""
        return self._event.wait(timeout)

    def exception(self) -> BaseException | None:
        return self._exception

    @property
    def value(self) -> T:
        return self._value  # type: ignore[no-any-return]

    def result(self, timeout: float | None = None) -> T:
        """The value, raising the failure or :class:`KafkaTimeoutError`."""
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(f"no result within {timeout}s")
        if self._exception is not None:
            raise self._exception
        return self._value  # type: ignore[no-any-return]

    # kafka-python / confluent spelling
    get = result
