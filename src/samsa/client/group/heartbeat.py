"""The heartbeat thread: keeps the member's session while the application is between polls.

One loop for every protocol. Each round runs the machine's ``heartbeat_tick`` and performs
what it returns: a FindCoordinator after a lost connection (Kafka's heartbeat thread looks
the coordinator up too) through :mod:`~samsa.client.group.discovery`, anything else (a
Heartbeat or ConsumerGroupHeartbeat, a LeaveGroup when ``max_poll_interval_ms`` passed
without a poll) through the driver's ``perform``. It then waits on the member's clock until
the machine's ``heartbeat_delay`` or :meth:`HeartbeatThread.wake`. It never blocks on the
network: answers are applied by the network thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from samsa.client.group.actions import FindCoordinator
from samsa.client.group.context import MemberContext
from samsa.client.group.discovery import CoordinatorDiscovery

__all__ = ["HeartbeatThread"]

MIN_PAUSE_S = 0.005
"""The shortest pause between two rounds (the thread never spins)."""
MAX_PAUSE_S = 0.5
"""The longest: the thread re-reads the machine at least this often."""


class HeartbeatThread:
    """Started on the first poll of a subscribed consumer; stopped by :meth:`stop`.

    ``perform(action)`` sends what the protocol's ``heartbeat_tick`` asks for, other than
    a FindCoordinator; it must not block.
    """

    def __init__(self, member: MemberContext[Any], discovery: CoordinatorDiscovery,
                 perform: Callable[[object], None]) -> None:
        self.member = member
        self.discovery = discovery
        self.perform = perform
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"samsa-heartbeat-{self.member.client_id}")
            self._thread.start()

    def wake(self) -> None:
        """Run the next round now (a coordinator was found, an answer came, or the thread
        must stop)."""
        self._wake.set()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread and wait up to ``timeout_s`` for it to end."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def run_once(self) -> float:
        """One round: perform what is due; the seconds to wait before the next round."""
        m = self.member
        with m.lock:
            actions = m.machine.heartbeat_tick(m.now_ms())
        for action in actions:
            if isinstance(action, FindCoordinator):
                self.discovery.start()
            else:
                self.perform(action)
        with m.lock:
            delay: float = m.machine.heartbeat_delay(m.now_ms())
        return max(MIN_PAUSE_S, min(delay / 1000, MAX_PAUSE_S))

    def _run(self) -> None:
        while not self._stopped.is_set():
            pause = self.run_once()
            self.member.clock.wait(self._wake, pause)
            self._wake.clear()
