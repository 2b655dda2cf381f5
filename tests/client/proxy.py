"""A TCP proxy in front of a broker: the fault hook of client tests.

:class:`FaultProxy` passes Kafka frames through and lets a test answer, delay, drop, swallow
or refuse chosen requests by API key (:class:`~samsa.protocol.api_keys.ApiKey`), instead of
reaching into the client. Responses reach the client in request order, as on a real
connection, whatever is injected.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import Request, decode_request, encode_response, response_class


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame (prefix included); None at end of stream."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return head + bytes(body)


def _client_id(frame: bytes) -> str | None:
    """The request header's client id (a nullable int16-length string at every version)."""
    if len(frame) < 14:
        return None
    (size,) = struct.unpack_from(">h", frame, 12)
    return None if size < 0 else frame[14:14 + size].decode("utf-8", "replace")


def shut(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()


# ---- faults ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """Answer with this kio response entity; the broker never sees the request."""

    response: Any


@dataclass(frozen=True)
class Delay:
    """Forward the request; hold its response (and those after it) this many seconds."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Forward the request; when its response comes, close the client's connection instead:
    the broker applied the request but the client never learns it."""


@dataclass(frozen=True)
class Swallow:
    """Never forward the request nor answer it, as a hung broker: the client's request
    timeout closes the connection. The responses owed after it are held too."""


@dataclass(frozen=True)
class Close:
    """Refuse the request: close the client's connection when it arrives, unforwarded."""


Fault = Answer | Delay | Drop | Swallow | Close
Rule = Fault | Callable[[Request], "Fault | None"] | None
"""A fault, a function of the decoded request choosing one (None: pass through), or None."""


def answer(**data: Any) -> Callable[[Request], Fault]:
    """A rule answering any request with ``data`` (at the request's version)."""
    return lambda req: Answer(build(response_class(req.api_key, req.api_version), data))


def error_answer(code: int) -> Callable[[Request], Fault]:
    """A rule answering OffsetCommit or Produce with ``code`` for every partition (the
    broker never sees the request), or any API whose response has a top-level
    ``error_code`` (Heartbeat, JoinGroup, SyncGroup, ...)."""

    def rule(req: Request) -> Fault:
        cls = response_class(req.api_key, req.api_version)
        if req.api_key == ApiKey.OFFSET_COMMIT:  # errors per partition
            data: dict[str, Any] = {"topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": code}
                    for p in t.partitions]}
                for t in req.body.topics]}
        elif req.api_key == ApiKey.PRODUCE:
            data = {"responses": [
                {"name": t.name, "partition_responses": [
                    {"index": p.index, "error_code": code, "base_offset": -1}
                    for p in t.partition_data]}
                for t in req.body.topic_data]}
        else:
            data = {"error_code": code}
        return Answer(build(cls, data))

    return rule


# ---- the proxy --------------------------------------------------------------------------------


class _Slot:
    """The response owed for one request, in request order."""

    __slots__ = ("close", "correlation", "delay", "frame", "ready_at")

    def __init__(self, correlation: int, delay: float = 0.0, close: bool = False) -> None:
        self.correlation = correlation
        self.delay = delay
        self.close = close
        self.frame: bytes | None = None
        self.ready_at: float | None = None  # set once the response (or the close) is known


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.slots: collections.deque[_Slot] = collections.deque()
        self.cond = threading.Condition()
        self.closed = False

    def cut(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        shut(self.client, self.upstream)


class FaultProxy:
    """Forwards 127.0.0.1:``port`` to a broker; faults are injected per API key.

    ``inject(api, f1, f2, ...)`` applies ``f1`` to the next request of ``api``, ``f2`` to
    the one after, and so on; ``always(api, rule)`` applies ``rule`` to every request of
    ``api`` until it is cleared with ``always(api, None)``. ``seen[api]`` counts requests,
    ``versions[(api, version, client_id)]`` counts them by version and client,
    ``pending(api)`` the injected faults not used yet, ``fired`` lists the faults
    applied, in order, as ``(api, fault)``, and ``peak_owed`` is the most requests one
    connection had unanswered at once (a client's pipeline depth).
    """

    def __init__(self) -> None:
        self.target: tuple[str, int] | None = None
        self.seen: collections.Counter[int] = collections.Counter()
        self.versions: collections.Counter[tuple[int, int, str | None]] = collections.Counter()
        self.fired: list[tuple[ApiKey, Fault]] = []
        self.peak_owed = 0
        self._once: dict[int, collections.deque[Rule]] = collections.defaultdict(
            collections.deque)
        self._always: dict[int, Rule] = {}
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._closed = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, target: tuple[str, int]) -> FaultProxy:
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.cut()

    # ---- the fault hook ---------------------------------------------------------------

    def inject(self, api_key: int, *faults: Rule) -> None:
        """Apply ``faults`` to the next requests of ``api_key``, one each, in order."""
        with self._lock:
            self._once[api_key].extend(faults)

    def always(self, api_key: int, rule: Rule) -> None:
        """Apply ``rule`` to every request of ``api_key`` (None: stop)."""
        with self._lock:
            if rule is None:
                self._always.pop(api_key, None)
            else:
                self._always[api_key] = rule

    def pending(self, api_key: int) -> int:
        """How many faults injected for ``api_key`` have not met their request yet."""
        with self._lock:
            return len(self._once.get(api_key, ()))

    def cut(self) -> None:
        """Close every client connection now (clients reconnect through the proxy)."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.cut()

    def _rule_for(self, api_key: int) -> Rule:
        with self._lock:
            self.seen[api_key] += 1
            queue = self._once.get(api_key)
            if queue:
                return queue.popleft()
            return self._always.get(api_key)

    # ---- plumbing -----------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                shut(client)
                continue
            link = _Link(client, upstream)
            with self._lock:
                self._links.append(link)
            for run in (self._requests, self._responses, self._writer):
                threading.Thread(target=run, args=(link,), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        """Client -> broker: apply faults, remember which responses are owed, forward."""
        with contextlib.suppress(OSError):
            while (frame := read_frame(link.client)) is not None:
                api, version, corr = struct.unpack_from(">hhi", frame, 4)
                with self._lock:
                    self.versions[(api, version, _client_id(frame))] += 1
                rule = self._rule_for(api)
                request = None
                if callable(rule) or api == ApiKey.PRODUCE:
                    request = decode_request(frame[4:], {api: (version, version)})
                fault = rule(request) if callable(rule) and request is not None else rule
                if fault is not None:
                    with self._lock:
                        self.fired.append((ApiKey(api), fault))
                if isinstance(fault, Close):
                    break
                expects = request is None or not (api == ApiKey.PRODUCE and
                                                  int(request.body.acks) == 0)
                with link.cond:
                    if isinstance(fault, Swallow):
                        link.slots.append(_Slot(corr))  # never ready: holds later responses
                        continue
                    if isinstance(fault, Answer):
                        slot = _Slot(corr)
                        slot.frame = encode_response(corr, fault.response)
                        slot.ready_at = time.monotonic()
                        link.slots.append(slot)
                        link.cond.notify_all()
                        continue
                    if expects:
                        link.slots.append(_Slot(corr, fault.seconds if isinstance(
                            fault, Delay) else 0.0, isinstance(fault, Drop)))
                    self.peak_owed = max(self.peak_owed, len(link.slots))
                link.upstream.sendall(frame)
        link.cut()

    def _responses(self, link: _Link) -> None:
        """Broker -> proxy: match each response to its slot."""
        with contextlib.suppress(OSError):
            while (frame := read_frame(link.upstream)) is not None:
                (corr,) = struct.unpack_from(">i", frame, 4)
                with link.cond:
                    slot = next((s for s in link.slots
                                 if s.correlation == corr and s.ready_at is None), None)
                    if slot is None:
                        break  # a response nobody asked for: end the connection
                    slot.frame = frame
                    slot.ready_at = time.monotonic() + slot.delay
                    link.cond.notify_all()
        link.cut()

    def _writer(self, link: _Link) -> None:
        """Proxy -> client: owed responses in request order, each when it is ready."""
        while True:
            with link.cond:
                while True:
                    if link.closed:
                        return
                    head = link.slots[0] if link.slots else None
                    wait = None
                    if head is not None and head.ready_at is not None:
                        wait = head.ready_at - time.monotonic()
                        if wait <= 0:
                            break
                    link.cond.wait(wait)
                slot = link.slots.popleft()
            if slot.close:
                link.cut()
                return
            try:
                assert slot.frame is not None
                link.client.sendall(slot.frame)
            except OSError:
                link.cut()
                return
