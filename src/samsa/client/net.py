"""Connections and the network thread shared by the consumer, producer and admin client.

One background thread owns every socket (non-blocking, one selector). Any thread calls
:meth:`NetworkClient.send` with a destination, an API key and the request as a plain mapping;
it gets a :class:`~samsa.client.future.Future` of the decoded kio response. Each connection
negotiates versions with ApiVersions first; requests use the highest version both sides
support, capped by :data:`CLIENT_MAX_VERSIONS`. Requests on one connection are answered in
order; a request past its deadline closes its connection, as in Kafka's clients.

With a :class:`~samsa.client.security.ClientSecurity`, a connection runs its TLS handshake
first (non-blocking, on the same selector) and, on a SASL listener, authenticates after
ApiVersions (SaslHandshake v1, then SaslAuthenticate) before any queued request is sent;
when the broker gives the session a lifetime (KIP-368) the connection re-authenticates
before it ends, once its in-flight requests are answered.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import random
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from samsa.client.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from samsa.client.future import Future
from samsa.client.security import ClientSecurity
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import build
from samsa.protocol.codec import RequestTemplates, decoded_class, encode_request
from samsa.security.sasl.client import ClientAuthError, ClientMechanism

__all__ = ["CLIENT_MAX_VERSIONS", "ApiKey", "Connector", "NetworkClient"]

log = logging.getLogger(__name__)


CLIENT_MAX_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,  # v13 addresses topics by id only
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.METADATA: 12,  # v10+ names topic ids (the consumer group protocol needs them)
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.API_VERSIONS: 4,  # v4 lists supported features whose minimum level is 0
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.DESCRIBE_ACLS: 3,
    ApiKey.CREATE_ACLS: 3,
    ApiKey.DELETE_ACLS: 3,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.LIST_TRANSACTIONS: 1,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.WRITE_TXN_MARKERS: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,  # v4+ are the brokers' (KIP-890)
    ApiKey.ADD_OFFSETS_TO_TXN: 4,
    ApiKey.END_TXN: 5,
    ApiKey.TXN_OFFSET_COMMIT: 5,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 1,
    ApiKey.SHARE_GROUP_HEARTBEAT: 1,
    ApiKey.SHARE_FETCH: 2,
    ApiKey.SHARE_ACKNOWLEDGE: 2,
    ApiKey.SASL_HANDSHAKE: 1,
    ApiKey.SASL_AUTHENTICATE: 2,
}
"""Highest version of each API this client speaks."""

Connector = Callable[[tuple[str, int]], socket.socket | None]
"""Opens a connection to an address in place of TCP (None: connect over TCP); a broker's
console passes one that connects in-process (``Broker.local_connection``)."""

_SIZE = struct.Struct(">i")
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
_CORR = struct.Struct(">i")
_RECV = 256 * 1024


class _Pending:
    __slots__ = ("api_key", "body", "deadline", "expect_response", "future", "payloads",
                 "template", "version")

    def __init__(self, api_key: int, body: Mapping[str, Any], future: Future[Any],
                 deadline: float, expect_response: bool,
                 payloads: list[bytes | memoryview] | None = None,
                 template: Hashable = None) -> None:
        self.api_key = api_key
        self.body = body
        self.future = future
        self.deadline = deadline
        self.expect_response = expect_response
        self.payloads = payloads
        self.template = template
        self.version = -1


class _Connection:
    """One socket: queued requests, in-flight requests (FIFO) and the read buffer."""

    def __init__(self, dest: Hashable, address: tuple[str, int]) -> None:
        self.dest = dest
        self.address = address
        self.sock: socket.socket | None = None
        self.state = "disconnected"  # connecting, handshaking (TLS), negotiating,
        #                              authenticating (SASL), ready
        self.versions: dict[int, tuple[int, int]] = {}
        #: the cluster's finalized features (name -> max level), from ApiVersions
        self.features: dict[str, int] = {}
        self.queued: collections.deque[_Pending] = collections.deque()
        self.in_flight: collections.deque[tuple[int, _Pending]] = collections.deque()
        self.out = bytearray()
        self.inbuf = bytearray()
        self.correlation = 0
        self.events = 0
        #: when to re-authenticate (time.monotonic()), None: the session does not end
        self.reauth_at: float | None = None


class NetworkClient:
    """The network thread and its connections (see module docstring)."""

    def __init__(self, client_id: str, request_timeout_ms: int = 30000,
                 reconnect_backoff_ms: int = 50, security: ClientSecurity | None = None,
                 connector: Connector | None = None) -> None:
        self.client_id = client_id
        self.security = security or ClientSecurity()
        self.connector = connector
        self.request_timeout = request_timeout_ms / 1000
        self.reconnect_backoff = reconnect_backoff_ms / 1000
        self._addresses: dict[Hashable, tuple[str, int]] = {}
        self._conns: dict[Hashable, _Connection] = {}
        self._blocked_until: dict[Hashable, float] = {}
        self._failed_at: dict[Hashable, float] = {}
        self._tasks: collections.deque[tuple[Hashable, _Pending]] = collections.deque()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self._lock = threading.Lock()
        self._templates = RequestTemplates()
        self._thread = threading.Thread(target=self._run, name=f"samsa-net-{client_id}",
                                        daemon=True)
        self._thread.start()

    # ---- any thread -------------------------------------------------------------------

    def set_address(self, dest: Hashable, host: str, port: int) -> None:
        """Name ``dest`` (a node id or any key) for ``host:port``."""
        with self._lock:
            self._addresses[dest] = (host, port)

    def address(self, dest: Hashable) -> tuple[str, int] | None:
        return self._addresses.get(dest)

    def send(self, dest: Hashable, api_key: int, body: Mapping[str, Any], *,
             timeout_ms: float | None = None, expect_response: bool = True,
             payloads: list[bytes | memoryview] | None = None,
             template: Hashable = None) -> Future[Any]:
        """Queue a request; the future resolves with the decoded response body.

        With ``payloads``, ``body`` holds :func:`~samsa.protocol.codec.placeholder` ``i``
        where ``payloads[i]`` belongs (record batches): they are spliced into the frame
        uncopied, and the rest of the frame is encoded once per ``template`` key (see
        :class:`~samsa.protocol.codec.RequestTemplates`). A ``"__version__"`` key in
        ``body`` pins the version; ``"__max_version__"`` caps the negotiated one.
        """
        future: Future[Any] = Future()
        if self._closed:
            future.failure(KafkaConnectionError("client closed"))
            return future
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000
        self._tasks.append((dest, _Pending(api_key, body, future, time.monotonic() + timeout,
                                           expect_response, payloads, template)))
        if self._closed:  # closed meanwhile: the network thread may be gone already
            self._fail_tasks()
        self._wakeup()
        return future

    def call(self, dest: Hashable, api_key: int, body: Mapping[str, Any], *,
             timeout_ms: float | None = None) -> Any:
        """Send and wait for the response (raises the failure)."""
        fut = self.send(dest, api_key, body, timeout_ms=timeout_ms)
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000
        return fut.result(timeout + 1)

    def disconnect(self, dest: Hashable) -> None:
        """Close the connection to ``dest`` (its requests fail)."""
        self._tasks.append((dest, _Pending(-1, {}, Future(), 0.0, False)))
        self._wakeup()

    def in_flight(self, dest: Hashable) -> int:
        """Requests to ``dest`` not answered yet (sent, or waiting for the connection)."""
        conn = self._conns.get(dest)
        return 0 if conn is None else len(conn.in_flight) + len(conn.queued)

    def last_failure(self, dest: Hashable) -> float | None:
        """When (:func:`time.monotonic`) ``dest``'s connection last failed: refused, reset,
        or closed by a request timeout; None if it never did. For ranking nodes."""
        return self._failed_at.get(dest)

    def api_version(self, dest: Hashable, api_key: int) -> int | None:
        """Negotiated version for ``api_key`` on ``dest``'s connection, once connected."""
        conn = self._conns.get(dest)
        if conn is None or conn.state != "ready":
            return None
        return self._choose(conn, api_key)

    def finalized_feature(self, dest: Hashable, name: str) -> int | None:
        """The finalized level of feature ``name`` as ``dest`` announced it (0: not
        finalized), once connected; None before."""
        conn = self._conns.get(dest)
        if conn is None or conn.state != "ready":
            return None
        return conn.features.get(name, 0)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: every request fails from then on."""
        return self._closed

    @property
    def running(self) -> bool:
        """True while the network thread runs (until :meth:`close`)."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop the network thread; in-flight requests fail."""
        if self._closed:
            return
        self._closed = True
        self._wakeup()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _wakeup(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._wake_w.send(b"\0")

    # ---- network thread ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closed:
                self._drain_tasks()
                timeout = self._expire(time.monotonic())
                for key, mask in self._selector.select(timeout):
                    conn = key.data
                    if conn is None:
                        with contextlib.suppress(BlockingIOError, OSError):
                            self._wake_r.recv(4096)
                        continue
                    if conn.state == "handshaking":
                        self._tls_handshake(conn)
                        continue
                    if mask & selectors.EVENT_WRITE:
                        self._on_writable(conn)
                    if mask & selectors.EVENT_READ and conn.sock is not None:
                        self._on_readable(conn)
        except Exception:  # pragma: no cover - a bug; fail everything loudly
            log.exception("network thread crashed")
        finally:
            for conn in list(self._conns.values()):
                self._close(conn, KafkaConnectionError("client closed"), by_client=True)
            self._fail_tasks()
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _fail_tasks(self) -> None:
        """Fail the requests still queued once the client is closed (any thread): nothing
        else would, and their callers would wait out their whole timeout."""
        while True:
            try:
                _, pending = self._tasks.popleft()
            except IndexError:
                return
            try:
                pending.future.failure(KafkaConnectionError("client closed"))
            except Exception:
                log.exception("failure callback failed")

    def _drain_tasks(self) -> None:
        while self._tasks:
            dest, pending = self._tasks.popleft()
            if pending.api_key == -1:
                conn = self._conns.get(dest)
                if conn is not None:
                    self._close(conn, KafkaConnectionError("disconnected by client"),
                                by_client=True)
                continue
            conn = self._conns.get(dest)
            if conn is None or conn.state == "disconnected":
                address = self._addresses.get(dest)
                if address is None:
                    pending.future.failure(KafkaConnectionError(f"unknown node {dest!r}"))
                    continue
                if time.monotonic() < self._blocked_until.get(dest, 0.0):
                    pending.future.failure(
                        KafkaConnectionError(f"node {dest!r} in reconnect backoff"))
                    continue
                conn = _Connection(dest, address)
                self._conns[dest] = conn
                self._connect(conn)
                if conn.state == "disconnected":
                    pending.future.failure(KafkaConnectionError(f"cannot connect to {address}"))
                    continue
            conn.queued.append(pending)
            if conn.state == "ready":
                self._flush_queue(conn)

    def _connect(self, conn: _Connection) -> None:
        sock: socket.socket | None = None
        try:
            sock = self.connector(conn.address) if self.connector is not None else None
            if sock is not None:  # connected already (in-process)
                err = 0
                sock.setblocking(False)
            else:
                sock = socket.socket(socket.AF_INET6 if ":" in conn.address[0]
                                     else socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                err = sock.connect_ex(conn.address)
        except OSError as exc:
            log.debug("connect to %s failed: %s", conn.address, exc)
            if sock is not None:  # made, then failed: never leave it to the collector
                sock.close()
            self._connect_failed(conn.dest)
            return
        conn.sock = sock
        conn.state = "connecting"
        if err not in (0, 115, 36, 10035, 11):  # EINPROGRESS variants
            sock.close()
            conn.sock = None
            conn.state = "disconnected"
            self._connect_failed(conn.dest)
            return
        conn.events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self._selector.register(sock, conn.events, conn)

    def _connect_failed(self, dest: Hashable) -> None:
        now = time.monotonic()
        self._blocked_until[dest] = now + self.reconnect_backoff
        self._failed_at[dest] = now

    def _set_events(self, conn: _Connection, events: int) -> None:
        if conn.sock is not None and events != conn.events:
            conn.events = events
            self._selector.modify(conn.sock, events, conn)

    def _on_writable(self, conn: _Connection) -> None:
        assert conn.sock is not None
        if conn.state == "connecting":
            err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._connect_failed(conn.dest)
                self._close(conn, KafkaConnectionError(f"connect to {conn.address}: errno {err}"))
                return
            if self.security.ssl is not None:
                self._start_tls(conn)
                return
            conn.state = "negotiating"
            self._send_api_versions(conn)
        self._write(conn)

    def _start_tls(self, conn: _Connection) -> None:
        assert conn.sock is not None and self.security.ssl is not None
        self._selector.unregister(conn.sock)
        raw = conn.sock
        try:
            conn.sock = self.security.ssl.wrap_socket(
                raw, server_hostname=conn.address[0], do_handshake_on_connect=False)
        except (OSError, ValueError) as exc:
            raw.close()  # a no-op once wrap_socket took the descriptor over
            conn.sock = None
            self._close(conn, KafkaConnectionError(f"TLS to {conn.address}: {exc}"))
            return
        conn.state = "handshaking"
        conn.events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self._selector.register(conn.sock, conn.events, conn)
        self._tls_handshake(conn)

    def _tls_handshake(self, conn: _Connection) -> None:
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_events(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._set_events(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError) as exc:  # ssl.SSLError (bad certificate) is an OSError
            self._connect_failed(conn.dest)
            error: KafkaError = KafkaConnectionError(
                f"TLS handshake with {conn.address} failed: {exc}")
            if isinstance(exc, ssl.SSLCertVerificationError):
                error = AuthenticationError(f"TLS handshake with {conn.address} failed: {exc}")
            self._close(conn, error)
            return
        conn.state = "negotiating"
        self._send_api_versions(conn)
        self._write(conn)

    def _send_api_versions(self, conn: _Connection) -> None:
        fut: Future[Any] = Future()
        pending = _Pending(ApiKey.API_VERSIONS, {"client_software_name": "samsa",
                                                 "client_software_version": "0.1.0"},
                           fut, time.monotonic() + self.request_timeout, True)
        pending.version = 3
        self._enqueue_frame(conn, pending)

        def done(f: Future[Any]) -> None:
            if f.failed():
                return
            resp = f.value
            if int(resp.error_code) != ErrorCode.none:
                self._close(conn, KafkaConnectionError(f"ApiVersions failed: {resp.error_code}"))
                return
            conn.versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                             for k in resp.api_keys}
            conn.features = {f.name: int(f.max_version_level)
                             for f in getattr(resp, "finalized_features", ())}
            if self.security.sasl is not None:
                self._authenticate(conn)
                return
            conn.state = "ready"
            self._flush_queue(conn)

        fut.add_done_callback(done)

    # ---- SASL ---------------------------------------------------------------------------

    def _sasl_request(self, conn: _Connection, api_key: int, body: Mapping[str, Any],
                      then: Any) -> None:
        version = self._choose(conn, api_key)
        if version is None:
            self._close(conn, KafkaError(f"the broker at {conn.address} does not serve "
                                         f"{ApiKey(api_key).title}", 35))
            return
        fut: Future[Any] = Future()
        pending = _Pending(api_key, body, fut, time.monotonic() + self.request_timeout, True)
        pending.version = version
        self._enqueue_frame(conn, pending)
        fut.add_done_callback(lambda f: None if f.failed() else then(f.value))
        self._write(conn)

    def _authenticate(self, conn: _Connection) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism is done."""
        assert self.security.sasl is not None and self.security.sasl_mechanism is not None
        conn.state = "authenticating"
        mech = self.security.sasl()

        def handshake(resp: Any) -> None:
            if int(resp.error_code) != ErrorCode.none:
                self._close(conn, AuthenticationError(
                    f"the broker at {conn.address} does not enable SASL mechanism "
                    f"{self.security.sasl_mechanism} (it has {list(resp.mechanisms)})",
                    int(resp.error_code)))
                return
            self._sasl_request(conn, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": mech.first()},
                               step)

        def step(resp: Any) -> None:
            if int(resp.error_code) != ErrorCode.none:
                self._close(conn, AuthenticationError(
                    f"authentication with {conn.address} failed: {resp.error_message}",
                    int(resp.error_code)))
                return
            try:
                token = mech.respond(bytes(resp.auth_bytes))
            except ClientAuthError as exc:
                self._close(conn, AuthenticationError(
                    f"authentication with {conn.address} failed: {exc}"))
                return
            if token is not None:
                self._sasl_request(conn, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, step)
                return
            self._authenticated(conn, mech, resp)

        self._sasl_request(conn, ApiKey.SASL_HANDSHAKE,
                           {"mechanism": self.security.sasl_mechanism}, handshake)

    def _authenticated(self, conn: _Connection, mech: ClientMechanism, resp: Any) -> None:
        lifetime = getattr(resp, "session_lifetime", None)
        ms = lifetime.total_seconds() * 1000 if lifetime is not None else 0
        # Kafka's clients re-authenticate at 85-95% of the session's lifetime
        conn.reauth_at = time.monotonic() + ms / 1000 * random.uniform(0.85, 0.95) \
            if ms > 0 else None
        conn.state = "ready"
        self._flush_queue(conn)

    def _reauth_due(self, conn: _Connection) -> bool:
        """A session about to end: send nothing more; re-authenticate once answered."""
        if conn.reauth_at is None or conn.state != "ready" or time.monotonic() < conn.reauth_at:
            return False
        if not conn.in_flight:
            conn.reauth_at = None
            self._authenticate(conn)
        return True

    def _choose(self, conn: _Connection, api_key: int) -> int | None:
        broker = conn.versions.get(api_key)
        mine = CLIENT_MAX_VERSIONS.get(api_key)
        if broker is None or mine is None:
            return None
        version = min(mine, broker[1])
        return version if version >= broker[0] else None

    def _flush_queue(self, conn: _Connection) -> None:
        if self._reauth_due(conn):
            return
        while conn.queued and conn.state == "ready":
            pending = conn.queued.popleft()
            version = pending.body.get("__version__") if pending.body else None
            if version is None:
                version = self._choose(conn, pending.api_key)
                cap = pending.body.get("__max_version__") if pending.body else None
                if version is not None and cap is not None:
                    low = conn.versions[pending.api_key][0]
                    version = min(version, cap) if low <= cap else None
            if version is None:
                pending.future.failure(KafkaError(
                    f"broker does not support API {pending.api_key}", 35))
                continue
            pending.version = int(version)
            try:
                self._enqueue_frame(conn, pending)
            except Exception as exc:  # a bad request mapping: fail that request only
                pending.future.failure(exc)
        self._write(conn)

    def _enqueue_frame(self, conn: _Connection, pending: _Pending) -> None:
        conn.correlation = (conn.correlation + 1) & 0x7FFFFFFF

        def entity() -> Any:
            schema = load_request_schema(pending.api_key, pending.version)
            return build(schema, {k: v for k, v in pending.body.items()
                                  if k not in ("__version__", "__max_version__")})

        if pending.payloads is not None:  # spliced (see send)
            for chunk in self._templates.encode(pending.api_key, pending.version,
                                                conn.correlation, self.client_id,
                                                pending.template, entity, pending.payloads):
                conn.out += chunk
        else:
            conn.out += encode_request(pending.api_key, pending.version, conn.correlation,
                                       self.client_id, entity())
        if pending.expect_response:
            conn.in_flight.append((conn.correlation, pending))
        else:
            pending.future.success(None)

    def _write(self, conn: _Connection) -> None:
        if conn.sock is None or conn.state in ("connecting", "handshaking"):
            return
        if conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except _WOULD_BLOCK:
                sent = 0
            except OSError as exc:
                self._close(conn, KafkaConnectionError(f"send to {conn.address}: {exc}"))
                return
            del conn.out[:sent]
        self._set_events(conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0))

    def _on_readable(self, conn: _Connection) -> None:
        self._read_once(conn)
        sock = conn.sock
        while isinstance(sock, ssl.SSLSocket) and sock is conn.sock and sock.pending():
            self._read_once(conn)  # records OpenSSL decrypted beyond what was read

    def _read_once(self, conn: _Connection) -> None:
        assert conn.sock is not None
        try:
            data = self._recv(conn.sock, _RECV)
        except _WOULD_BLOCK:
            return
        except OSError as exc:
            self._close(conn, KafkaConnectionError(f"recv from {conn.address}: {exc}"))
            return
        if not data:
            self._close(conn, KafkaConnectionError(f"connection to {conn.address} closed"))
            return
        buf = conn.inbuf
        buf += data
        # Read more while the socket has data queued (large fetch responses).
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                need = size + 4 - (len(buf) - pos)
                if need > 0:
                    try:
                        more = self._recv(conn.sock, max(need, _RECV))
                    except _WOULD_BLOCK:
                        break
                    except OSError as exc:
                        self._close(conn, KafkaConnectionError(str(exc)))
                        return
                    if not more:
                        self._close(conn, KafkaConnectionError("connection closed"))
                        return
                    buf += more
                    continue
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self._on_frame(conn, frame)
            if conn.sock is None:
                return
        del buf[:pos]

    @staticmethod
    def _recv(sock: socket.socket, size: int) -> bytes:
        """Up to ``size`` bytes; over TLS also what OpenSSL already decrypted (the selector
        does not see it)."""
        data = sock.recv(size)
        if data and isinstance(sock, ssl.SSLSocket):
            while len(data) < size and sock.pending():
                data += sock.recv(min(sock.pending(), size - len(data)))
        return data

    def _on_frame(self, conn: _Connection, frame: bytes) -> None:
        if not conn.in_flight:
            self._close(conn, KafkaConnectionError("unexpected response"))
            return
        correlation, pending = conn.in_flight.popleft()
        (got,) = _CORR.unpack_from(frame, 0)
        if got != correlation:
            self._close(conn, KafkaConnectionError(
                f"correlation id {got} does not match expected {correlation}"))
            pending.future.failure(KafkaConnectionError("correlation mismatch"))
            return
        try:
            cls = decoded_class(pending.api_key, pending.version)  # cached
            header_reader, body_reader = _readers(cls)
            _, used = header_reader(frame, 0)
            body, _ = body_reader(frame, used)
        except Exception as exc:
            pending.future.failure(KafkaError(f"cannot decode response to API "
                                              f"{pending.api_key} v{pending.version}: {exc}"))
            return
        try:
            pending.future.success(body)
        except Exception:  # a callback bug must not kill the network thread
            log.exception("response callback failed")
        if conn.reauth_at is not None and not conn.in_flight:
            self._reauth_due(conn)

    def _expire(self, now: float) -> float | None:
        """Fail requests past their deadline (closing their connection); next timeout."""
        nearest: float | None = None
        for conn in list(self._conns.values()):
            if conn.reauth_at is not None and not conn.in_flight:
                self._reauth_due(conn)
            for _, pending in conn.in_flight:
                if pending.deadline <= now:
                    self._close(conn, KafkaTimeoutError(
                        f"request API {pending.api_key} to {conn.address} timed out"))
                    break
                if nearest is None or pending.deadline < nearest:
                    nearest = pending.deadline
            else:
                for pending in conn.queued:
                    if pending.deadline <= now:
                        self._close(conn, KafkaTimeoutError(f"connect to {conn.address} timed out"))
                        break
                    if nearest is None or pending.deadline < nearest:
                        nearest = pending.deadline
        if nearest is None:
            return 1.0
        return max(0.0, min(1.0, nearest - now))

    def _close(self, conn: _Connection, exc: KafkaError, by_client: bool = False) -> None:
        """Close ``conn``, failing its requests with ``exc``; unless ``by_client``, a failure
        of the node (see :meth:`last_failure`)."""
        if not by_client:
            self._failed_at[conn.dest] = time.monotonic()
        if conn.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
            conn.sock.close()
            conn.sock = None
        conn.state = "disconnected"
        if self._conns.get(conn.dest) is conn:
            del self._conns[conn.dest]
        failed = [p for _, p in conn.in_flight] + list(conn.queued)
        conn.in_flight.clear()
        conn.queued.clear()
        for pending in failed:
            try:
                pending.future.failure(exc)
            except Exception:
                log.exception("failure callback failed")


_READERS: dict[type[Any], tuple[Any, Any]] = {}


def _readers(cls: type[Any]) -> tuple[Any, Any]:
    r = _READERS.get(cls)
    if r is None:
        r = (entity_reader(cls.__header_schema__), entity_reader(cls))
        _READERS[cls] = r
    return r
