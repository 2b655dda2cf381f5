"""The heartbeat thread: keeps the member's session while the application is between polls.

Each round runs :meth:`~samsa.client.membership.Membership.heartbeat_tick` and performs what
it returns: a Heartbeat, a FindCoordinator after a lost connection (Kafka's HeartbeatThread
looks the coordinator up too), or a LeaveGroup when ``max_poll_interval_ms`` passed without
a poll. It then waits on the member's clock until the next heartbeat is due or
:meth:`HeartbeatThread.wake` is called. It never blocks on the network.
"""

from __future__ import annotations

import threading
from typing import Any

from samsa.client.discovery import CoordinatorDiscovery
from samsa.client.future import Future
from samsa.client.member import MemberContext
from samsa.client.membership import FindCoordinator, SendHeartbeat, SendLeaveGroup
from samsa.client.net import ApiKey

__all__ = ["HeartbeatThread"]


class HeartbeatThread:
    """Started on the first poll of a subscribed consumer; stopped by :meth:`stop`."""

    def __init__(self, member: MemberContext, discovery: CoordinatorDiscovery) -> None:
        self.member = member
        self.discovery = discovery
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
        """Run the next round now (a coordinator was found, or the thread must stop)."""
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
            now = m.now_ms()
            actions = m.machine.heartbeat_tick(now)
            delay = m.machine.heartbeat_delay(now)
        for action in actions:
            if isinstance(action, SendHeartbeat):
                self.send(action)
            elif isinstance(action, FindCoordinator):
                self.discovery.start()
            elif isinstance(action, SendLeaveGroup):
                m.send_leave(action, wait=False)
        return max(0.005, min(delay / 1000, 0.5))

    def _run(self) -> None:
        while not self._stopped.is_set():
            pause = self.run_once()
            self.member.clock.wait(self._wake, pause)
            self._wake.clear()

    def send(self, action: SendHeartbeat) -> None:
        """Send a Heartbeat; its answer is applied by the network thread.

        Its timeout is the request timeout, bounded by the session timeout: a heartbeat
        left unanswered closes the connection, and the member finds the coordinator again
        while its session lasts.
        """
        m = self.member
        body = {"group_id": m.group_id, "generation_id": action.generation,
                "member_id": action.member_id,
                "group_instance_id": m.config.group_instance_id}
        timeout_ms = min(m.net.request_timeout * 1000, m.config.session_timeout_ms)
        fut = m.net.send(m.coordinator_dest(), ApiKey.HEARTBEAT, body, timeout_ms=timeout_ms)

        def done(f: Future[Any]) -> None:
            with m.lock:
                now = m.now_ms()
                if f.failed():
                    m.machine.on_heartbeat_failed(str(f.exception()), now)
                else:
                    m.machine.on_heartbeat_response(int(f.value.error_code), now,
                                                    action.generation)

        fut.add_done_callback(done)
