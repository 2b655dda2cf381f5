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

from samsa.client.errors import KafkaError
from samsa.client.future import Future
from samsa.client.group.context import MemberContext
from samsa.client.net import ApiKey

__all__ = ["CoordinatorDiscovery"]

log = logging.getLogger(__name__)

COORDINATOR_KEY_GROUP = 0
"""FindCoordinator ``key_type`` of a consumer group (1 is a transactional id)."""


class CoordinatorDiscovery:
    """Looks the coordinator up; ``on_found`` runs (under the lock) once it is known."""

    def __init__(self, member: MemberContext[Any], on_found: Callable[[], None]) -> None:
        self.member = member
        self.on_found = on_found
        self._future: Future[Any] | None = None
        self._failed = False
        """The last lookup failed retriably: refresh the broker list before the next."""

    def ensure(self, deadline: float) -> bool:
        """Find the coordinator, blocking until ``deadline`` (seconds on the member's clock).

        A lookup is sent (unless one is in flight, or the last failed less than
        ``retry_backoff_ms`` ago) even when the deadline has passed, so that ``poll(0)``
        in a loop finds the coordinator too. After a retriable failure the broker list is
        refreshed first (Kafka's ``awaitMetadataUpdate``): the node asked may be gone.
        False if the coordinator is still unknown at the deadline; raises a fatal lookup
        error.
        """
        m = self.member
        while m.machine.coordinator is None:
            m.check_wakeup()
            m.raise_fatal()
            if m.now_ms() >= m.machine.retry_at:
                self._refresh_if_failed(deadline)
                self.lookup(deadline)
                if m.machine.coordinator is not None:
                    return True
                m.raise_fatal()
            now = m.clock.now()
            if now >= deadline:
                return False
            wait = (m.machine.retry_at - m.now_ms()) / 1000
            m.clock.sleep(max(0.0, min(wait, 0.1, deadline - now)))
        return True

    def _refresh_if_failed(self, deadline: float) -> None:
        """Refresh the broker list (no topics) after a failed lookup, within ``deadline``."""
        if not self._failed or self._future is not None:
            return
        m = self.member
        try:
            m.metadata.refresh((), max(0.1, deadline - m.clock.now()))
            self._failed = False
        except KafkaError as exc:
            log.debug("metadata refresh after a failed FindCoordinator: %s", exc)

    def lookup(self, deadline: float) -> None:
        """Send FindCoordinator (or keep waiting for the one in flight) until ``deadline``.

        The request gets the full request timeout and survives short polls: it shares the
        broker connection with long-polling fetches, so a short timeout would never do.
        """
        m = self.member
        fut = self.start()
        while not m.clock.wait(fut, max(0.0, min(0.05, deadline - m.clock.now()))):
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
                self._failed = True
                return bool(m.machine.coordinator_lookup_failed(
                    ErrorCode.network_exception, now, f"FindCoordinator: {fut.exception()}"))
            resp = fut.value
            if hasattr(resp, "coordinators"):  # v4+: one entry per key
                c = next((c for c in resp.coordinators if c.key == m.group_id), None)
                if c is None:  # Kafka's consumer: IllegalStateException, not retried
                    return bool(m.machine.coordinator_lookup_failed(
                        ErrorCode.unknown_server_error, now,
                        f"FindCoordinator answered no coordinator for group {m.group_id!r} "
                        f"({len(resp.coordinators)} entries)"))
                code, node, host, port = int(c.error_code), int(c.node_id), c.host, int(c.port)
            else:
                code, node, host, port = (int(resp.error_code), int(resp.node_id), resp.host,
                                          int(resp.port))
            if code != ErrorCode.none:
                fatal = bool(m.machine.coordinator_lookup_failed(
                    code, now, "FindCoordinator failed"))
                self._failed = not fatal
                return fatal
            m.net.set_address(("coordinator", node), host, port)
            m.machine.coordinator_found(node, now)
            self.on_found()  # heartbeat at once if one is due
            return False
