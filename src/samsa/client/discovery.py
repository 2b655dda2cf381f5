"""Finding the group coordinator: FindCoordinator, from the user or the heartbeat thread.

At most one FindCoordinator is in flight. Its answer is applied once, by whichever comes
first: the network thread's callback (so the heartbeat thread never blocks on it) or the
user thread waiting for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.client.future import Future
from samsa.client.member import GroupContext
from samsa.client.net import ApiKey

__all__ = ["CoordinatorDiscovery"]

log = logging.getLogger(__name__)

COORDINATOR_KEY_GROUP = 0
"""FindCoordinator ``key_type`` of a consumer group (1 is a transactional id)."""


class CoordinatorDiscovery:
    """Looks the coordinator up; ``on_found`` runs (under the lock) once it is known."""

    def __init__(self, member: GroupContext, on_found: Callable[[], None]) -> None:
        self.member = member
        self.on_found = on_found
        self._future: Future[Any] | None = None

    def ensure(self, deadline: float) -> bool:
        """Find the coordinator, blocking until ``deadline`` (seconds on the member's clock).

        False if it is still unknown at the deadline; raises a fatal lookup error.
        """
        m = self.member
        while m.machine.coordinator is None:
            m.check_wakeup()
            m.raise_fatal()
            if m.clock.now() >= deadline:
                return False
            now = m.now_ms()
            if now < m.machine.retry_at:
                m.clock.sleep(min((m.machine.retry_at - now) / 1000, 0.1))
                continue
            self.lookup(deadline)
        return True

    def lookup(self, deadline: float) -> None:
        """Send FindCoordinator (or keep waiting for the one in flight) until ``deadline``.

        The request gets the full request timeout and survives short polls: it shares the
        broker connection with long-polling fetches, so a short timeout would never do.
        """
        m = self.member
        fut = self.start()
        while not m.clock.wait(fut, 0.05):
            m.check_wakeup()
            if m.clock.now() >= deadline:
                return
        if self._apply(fut):
            m.raise_fatal()

    def start(self) -> Future[Any]:
        """The FindCoordinator in flight, sent now if there is none (from either thread)."""
        m = self.member
        with m.lock:
            fut = self._future
            if fut is None:
                body: dict[str, Any] = {"key": m.group_id, "key_type": COORDINATOR_KEY_GROUP,
                                        "coordinator_keys": [m.group_id]}
                fut = self._future = m.net.send(m.metadata.any_node(),
                                                ApiKey.FIND_COORDINATOR, body)
                fut.add_done_callback(self._on_done)
        return fut

    def _on_done(self, fut: Future[Any]) -> None:
        self._apply(fut)  # a fatal error stays in the machine for the next poll

    def _apply(self, fut: Future[Any]) -> bool:
        """Apply the answer of ``fut`` (once); True if it was a fatal error."""
        m = self.member
        with m.lock:
            if self._future is not fut:
                return False  # already applied
            self._future = None
            now = m.now_ms()
            if fut.failed():
                log.debug("FindCoordinator failed: %s", fut.exception())
                return bool(m.machine.coordinator_lookup_failed(
                    ErrorCode.network_exception, now, f"FindCoordinator: {fut.exception()}"))
            resp = fut.value
            if hasattr(resp, "coordinators"):  # v4+: one entry per key
                c = resp.coordinators[0]
                code, node, host, port = int(c.error_code), int(c.node_id), c.host, int(c.port)
            else:
                code, node, host, port = (int(resp.error_code), int(resp.node_id), resp.host,
                                          int(resp.port))
            if code != ErrorCode.none:
                return bool(m.machine.coordinator_lookup_failed(
                    code, now, f"FindCoordinator error {code}"))
            m.net.set_address(("coordinator", node), host, port)
            m.machine.coordinator_found(node, now)
            self.on_found()  # heartbeat at once if one is due
            return False
