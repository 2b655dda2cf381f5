"""The asyncio edge: listening sockets, connections, request dispatch, background tasks.

The broker runs over a storage engine it is handed (:mod:`samsa.broker.storage`: local
segment files or a cluster over PostgreSQL, chosen by ``samsa serve``) and names none.
It listens on each of its listeners (``listeners``; one PLAINTEXT listener on
``--listen`` by default). Each connection reads size-prefixed frames and starts a handler
per request in arrival order, run at once up to its first wait (so a handler's synchronous
part, e.g. a log append, runs in order, and an answer ready at once costs no task); the
responses are written back strictly in request order, all those ready in one write.

Ordering: Kafka handles a connection's requests one at a time, so they take effect in the
order sent. samsa keeps that while it overlaps their waits: a handler takes effect (or
reads) in its synchronous part, before its first wait, and a later request of the
connection may start while it waits for what comes after (Produce's durability, a parked
JoinGroup's answer, the group coordinator's write of a commit applied already). A handler
that must wait *before* it takes effect (share-offset resets, ACL and SCRAM changes,
transaction coordinator calls: :meth:`RequestContext.hold
<samsa.broker.context.RequestContext.hold>`) holds the connection's later requests until it
is answered, as Kafka would. One deliberate difference: a Fetch or ShareFetch parked for
data does not hold; it may return records a later Produce of the same connection appended.
Frames
that are too large or do not decode close the connection; an unsupported ApiVersions
version is answered with UNSUPPORTED_VERSION in a v0 body, as Kafka does.

Authentication (TLS, SASL) lives in :mod:`samsa.security`; a connection asks its
:class:`~samsa.security.edge.Authentication` what to do with each frame until it is
authenticated, and stamps every request with its principal and listener. Connection limits,
idle and unauthenticated deadlines and ``queued.max.request.bytes`` are enforced here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import replace
from functools import partial
from typing import Any, cast

from samsa.broker import access
from samsa.broker.clock import now_ms
from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.dynamic_config import DynamicConfigs
from samsa.broker.groups import GroupRuntime
from samsa.broker.handlers import Handler, registry
from samsa.broker.handlers.api_versions import unsupported_version_response
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.shares import ShareRuntime
from samsa.broker.storage import Engine, Node
from samsa.broker.topics import TopicManager
from samsa.broker.transactions import TxnRuntime
from samsa.broker.txn_offsets import TxnOffsets
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import convert
from samsa.protocol.codec import (
    Encoded,
    FrameError,
    Spliced,
    UnsupportedApi,
    decode_request,
    encode_response,
    encode_spliced,
    peek_header,
    response_class,
)
from samsa.security.credentials import CredentialStore
from samsa.security.edge import Authentication
from samsa.security.limits import ConnectionLimits, RequestMemory, parse_overrides
from samsa.security.listeners import parse_advertised
from samsa.security.principal import KafkaPrincipal
from samsa.security.sasl.exchange import Reply
from samsa.security.setup import ListenerSecurity, listener_security

log = logging.getLogger("samsa.broker")

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 128
_RECV_BUFFER = 1 << 16

Outgoing = bytes | list[bytes | memoryview] | None
"""A response frame, as one buffer or several (spliced), or nothing (acks=0)."""


class Broker:
    """A samsa node: topics, request handlers and the TCP server."""

    def __init__(self, config: BrokerConfig, engine: Engine) -> None:
        self.config = config
        self.engine = engine
        self.topics = TopicManager(config, engine.topics,
                                   DynamicConfigs(config, engine.configs))
        self.producer_ids = engine.producer_ids
        self.leadership = engine.leadership
        self.metrics = BrokerMetrics()
        self.authorizer = access.authorizer_for(config, engine.acls)
        self.groups = GroupRuntime(self)
        self.txn_offsets = TxnOffsets(self.groups)
        self.transactions = TxnRuntime(self, self.txn_offsets)
        self.shares = ShareRuntime(config, self.topics, self.topics.dynamic.group,
                                   engine.share_states)
        self.groups.share_member_left = self.shares.release_member
        self.handlers: dict[int, tuple[tuple[int, int], Handler]] = registry()
        self.supported = {key: versions for key, (versions, _) in self.handlers.items()}
        self.features_epoch = now_ms()
        """FinalizedFeaturesEpoch of ApiVersions: the start time (see samsa.broker.features)."""
        self.credentials: CredentialStore = engine.credentials
        self.security: list[ListenerSecurity] = listener_security(config, self.credentials)
        self.limits = ConnectionLimits(
            int(config["max.connections"]), int(config["max.connections.per.ip"]),
            parse_overrides(str(config["max.connections.per.ip.overrides"])),
            {s.listener.name: int(config.for_listener(s.listener.name, "max.connections"))
             for s in self.security})
        self.request_memory = RequestMemory(int(config["queued.max.request.bytes"]))
        self.paused: set[Connection] = set()
        #: listener name -> (host, port) given to clients (filled in once bound)
        self.endpoints: dict[str, tuple[str, int]] = {}
        self._servers: list[asyncio.Server] = []
        self.connections: set[Connection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        """The port of the first listener."""
        return int(self._servers[0].sockets[0].getsockname()[1])

    def listener_port(self, name: str) -> int:
        for sec, server in zip(self.security, self._servers, strict=True):
            if sec.listener.name == name:
                return int(server.sockets[0].getsockname()[1])
        raise KeyError(name)

    async def local_connection(self, principal: KafkaPrincipal) -> socket.socket:
        """A connection into this broker without a network, as ``principal`` (what the
        console's admin client acts through): the client's end of a socket pair, served as
        a PLAINTEXT connection of the first listener whose principal is ``principal``, with
        no client address (only ACLs for host ``*`` match it)."""
        ours, theirs = socket.socketpair()
        first = self.security[0].listener
        sec = ListenerSecurity(replace(first, protocol="PLAINTEXT"), principal=principal)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                partial(Connection, self, sec), ours)
        except BaseException:  # stopping, or the caller gave up waiting: close both ends
            ours.close()
            theirs.close()
            raise
        return theirs

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        await self.engine.open(Node(
            self.config, lambda: self.endpoints, self.groups.gain, self.groups.drop_shard,
            self._topics_changed, self._acls_changed, self.transactions.gain,
            self.transactions.lose, self.transactions.write_forwarded,
            self.transactions.add_for_peer,
            on_partition_gained=self.shares.lead, on_partition_lost=self.shares.unlead,
            on_share_resets=self.shares.apply_resets,
            on_configs_changed=self._configs_changed))
        if self.authorizer is not None:
            await self.authorizer.load()
        self.topics.load(now_ms())
        await self.credentials.refresh()
        await self.groups.start()
        await self.transactions.start()
        await self.shares.start()
        loop = asyncio.get_running_loop()
        handshake_s = int(self.config["connections.authentication.timeout.ms"]) / 1000
        for sec in self.security:
            lst = sec.listener
            tls: dict[str, Any] = {} if sec.ssl is None else {
                "ssl": sec.ssl, "ssl_handshake_timeout": handshake_s}
            self._servers.append(await loop.create_server(
                partial(Connection, self, sec), lst.host, lst.port, backlog=1024, **tls))
        if self.config.port == 0 or self.config["listeners"]:
            # The first listener is the broker's address (the metrics server's host too);
            # advertise the ephemeral port we actually got.
            object.__setattr__(self.config, "host", self.security[0].listener.host)
            object.__setattr__(self.config, "port", self.port)
        self.endpoints = self._advertised()
        await self.engine.start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._tasks.append(asyncio.create_task(self._watch_connections()))
        self.started.set()
        for sec in self.security:
            log.info("samsa listening on %s:%d (%s, %s)", sec.listener.host,
                     self.listener_port(sec.listener.name), sec.listener.name,
                     sec.listener.protocol)

    def _topics_changed(self) -> None:
        """Another node changed the shared catalog: the topic view re-reads it and the group
        coordinator takes the new topics at once (a group it is handed later is assigned
        from them, before any of its members has called)."""
        self.topics.refresh()
        self.groups.sync_topics()

    async def _acls_changed(self, version: int) -> None:
        """The engine's ACLs are at ``version`` (another node changed them): reload."""
        if self.authorizer is not None:
            await self.authorizer.sync(version)

    def _configs_changed(self) -> None:
        """Another node changed the stored dynamic configs: take them (the topics' log
        configs follow a change of the broker settings)."""
        if self.topics.dynamic.refresh():
            self.topics.reconfigure_all()

    def _advertised(self) -> dict[str, tuple[str, int]]:
        """Each listener's advertised address: ``advertised.listeners``, else the bound
        address; the ``--listen`` listener honours ``advertised.host``/``.port``."""
        config = self.config
        listeners = [sec.listener for sec in self.security]
        out = parse_advertised(str(config["advertised.listeners"]), listeners)
        for lst in listeners:
            if lst.name not in out:
                out[lst.name] = ((config.advertised_host, config.advertised_port)
                                 if not config["listeners"]
                                 else (lst.host, self.listener_port(lst.name)))
        return out

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.engine.stop()  # a cluster node hands its leases over first
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        await self.transactions.stop()
        await self.groups.stop()
        self.shares.close()
        for server in self._servers:
            await server.wait_closed()
        await asyncio.get_running_loop().run_in_executor(None, self._flush_all)
        self.topics.close()
        self.engine.close()

    def _flush_all(self) -> None:
        for topic in self.topics:
            for part in topic.partitions:
                part.log.flush()

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    async def _housekeeping(self) -> None:
        interval = max(0.05, int(self.config["log.retention.check.interval.ms"]) / 1000)
        while True:
            await asyncio.sleep(interval)
            self.run_retention(now_ms())
            await self.run_compaction(now_ms())

    async def _watch_connections(self) -> None:
        """Close idle connections (``connections.max.idle.ms``) and those not authenticated
        in time; re-read changed SCRAM credentials (``samsa users`` beside a running broker,
        or another cluster node's change)."""
        idle_s = int(self.config["connections.max.idle.ms"]) / 1000
        auth_s = int(self.config["connections.authentication.timeout.ms"]) / 1000
        tick = min(1.0, max(0.05, min(idle_s, auth_s) / 4))
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for conn in list(self.connections):
                conn.check_deadlines(now, idle_s, auth_s)
            try:
                await self.credentials.refresh()
            except Exception:  # keep serving with the users known
                log.exception("cannot re-read SCRAM credentials")

    def memory_taken(self, conn: Connection) -> None:
        """``queued.max.request.bytes`` reached: ``conn`` stops reading until answers go out."""
        if self.request_memory.full:
            conn.pause_for_memory()
            self.paused.add(conn)

    def memory_given(self) -> None:
        if self.paused and not self.request_memory.full:
            for conn in list(self.paused):
                conn.resume_for_memory()
            self.paused.clear()

    def run_retention(self, now: int) -> None:
        """Apply retention to every partition."""
        for topic in self.topics:
            for part in topic.partitions:
                try:
                    part.log.apply_retention(now)
                except Exception:  # keep serving; report the partition
                    log.exception("retention failed for %s-%d", part.topic, part.index)

    async def run_compaction(self, now: int) -> None:
        """Compact every partition whose cleanup.policy has compact, one at a time (each
        engine does the slow part off the loop: requests keep being served)."""
        for topic in list(self.topics):
            for part in list(topic.partitions):
                if part.log.closed or not part.log.config.compact:
                    continue  # closed: its topic was deleted meanwhile
                try:
                    await part.log.run_compaction(now)
                except asyncio.CancelledError:
                    raise  # shutting down: closing the log stops the cleaner
                except Exception:  # keep serving; report the partition
                    log.exception("compaction failed for %s-%d", part.topic, part.index)

    async def dispatch(self, ctx: RequestContext) -> Any:
        """The handler's answer in the request's version: a handler may build a typed
        answer of another version of the API (its newest); :func:`convert` maps it. An
        answer encoded already (:class:`Encoded`, :class:`Spliced`) goes as it is."""
        request = ctx.request
        _, handler = self.handlers[request.api_key]
        response = await handler(ctx)
        if response is None or isinstance(response, (Encoded, Spliced)):
            return response
        return convert(response, response_class(request.api_key, request.api_version))


class _Closing(bytes):
    """A response frame after which the connection closes (a failed authentication)."""


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in, a handler per request, answers in order.

    Small frames are cut from a fixed receive buffer; a frame larger than it is received
    straight into a buffer of its own (no copies of megabyte produce requests). When
    ``MAX_IN_FLIGHT`` requests are pending, or ``queued.max.request.bytes`` are taken
    broker-wide, reading pauses until answers go out. On a TLS listener the connection is
    made once the TLS handshake completed (within ``connections.authentication.timeout.ms``):
    the connection limits count it from then on.
    """

    def __init__(self, broker: Broker, security: ListenerSecurity) -> None:
        self.broker = broker
        self.auth = Authentication(security)
        self.listener = security.listener.name
        self.frame_limit = int(broker.config["socket.request.max.bytes"])
        self.max_frame = self.auth.max_frame(self.frame_limit)
        self.transport: asyncio.Transport | None = None
        self.host = access.NO_ADDRESS
        self.ip = ""
        self._buf = bytearray(_RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._len = 0
        self._big: bytearray | None = None
        self._big_pos = 0
        self._queue: deque[tuple[asyncio.Future[Outgoing], int]] = deque()
        self._ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._closed = False
        self._closing = False  # a closing answer is queued: read nothing more
        self._paused = False
        self._memory_paused = False
        self._counted = False
        self._writer: asyncio.Task[None] | None = None
        #: the effect a later request must wait for before it starts (see :meth:`hold`)
        self._held: asyncio.Future[None] | None = None
        self._starting = False  # a handler runs its part up to its first wait
        self._hold: asyncio.Future[None] | None = None  # the one it asked for
        self.opened_at = self.last_active = time.monotonic()

    # -- transport callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = self.transport.get_extra_info("peername")
        self.ip = str(peer[0]) if peer else ""
        self.host = f"/{peer[0]}" if peer else access.NO_ADDRESS
        refused = self.broker.limits.admit(self.listener, self.ip)
        if refused is not None:
            log.info("refusing connection from %s on %s: %s", self.host, self.listener, refused)
            self._closed = True
            self.transport.abort()
            return
        self._counted = True
        self.broker.connections.add(self)
        if self.auth.security.ssl is not None:  # called once TLS is up
            try:
                self.auth.tls_established(self.transport.get_extra_info("peercert"))
            except ValueError as exc:
                self._fail(f"authentication failed: {exc}")
                return
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._ready.set()
        self._can_write.set()
        for task, _ in self._queue:
            task.cancel()
        self._release_memory()
        self._queue.clear()
        if self._counted:
            self._counted = False
            self.broker.limits.release(self.listener, self.ip)
        self.broker.connections.discard(self)
        self.broker.paused.discard(self)
        self.broker.shares.connection_closed(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_pos :]
        return self._view[self._len :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed or self._closing:
            return
        self.last_active = time.monotonic()
        if self._big is not None:
            self._big_pos += nbytes
            if self._big_pos == len(self._big):
                frame, self._big = self._big, None
                # kio reads read-only buffers; its memory was taken when it was allocated
                self._submit(memoryview(frame).toreadonly(), taken=True)
            return
        self._len += nbytes
        self._cut_frames()

    def eof_received(self) -> bool:
        return False  # close our side too

    # -- deadlines and memory --------------------------------------------------------------
    def check_deadlines(self, now: float, idle_s: float, auth_s: float) -> None:
        """Close when not authenticated within ``auth_s`` or idle for ``idle_s``."""
        if self._closed:
            return
        if not self.auth.authenticated and now - self.opened_at > auth_s:
            self._fail(f"not authenticated within {auth_s * 1000:.0f} ms")
        elif not self._queue and now - self.last_active > idle_s:
            self._fail(f"idle for more than {idle_s * 1000:.0f} ms (connections.max.idle.ms)")

    def pause_for_memory(self) -> None:
        if not self._memory_paused and self.transport is not None:
            self._memory_paused = True
            self.transport.pause_reading()

    def resume_for_memory(self) -> None:
        if self._memory_paused and self.transport is not None and not self._closed:
            self._memory_paused = False
            if not self._paused:
                self.transport.resume_reading()

    def _take_memory(self, size: int) -> None:
        self.broker.request_memory.take(size)
        self.broker.memory_taken(self)

    def _release_memory(self) -> None:
        given = sum(size for _, size in self._queue)
        if self._big is not None:
            given += len(self._big)
        if given:
            self.broker.request_memory.give(given)
            self.broker.memory_given()

    # -- framing ---------------------------------------------------------------------------
    def _cut_frames(self) -> None:
        buf, end, pos = self._buf, self._len, 0
        while end - pos >= 4 and not self._closing:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_frame:
                self._fail(f"frame size {size} outside [0, {self.max_frame}]")
                return
            start = pos + 4
            if end - start >= size:
                self._submit(bytes(buf[start : start + size]))
                pos = start + size
            elif 4 + size > len(buf):
                have = end - start
                self._big = bytearray(size)
                self._take_memory(size)
                self._big[:have] = buf[start:end]
                self._big_pos = have
                pos = end
                break
            else:
                break
        if pos:
            rest = end - pos
            buf[:rest] = buf[pos:end]
            self._len = rest

    def _submit(self, frame: bytes | memoryview, taken: bool = False) -> None:
        held = self._held
        if held is None or held.done():
            fut = self._begin(frame)
            self._held = self._took_hold(fut)
        else:  # an earlier request has not taken effect: this one starts after it
            gate = asyncio.get_running_loop().create_future()
            self._held = gate
            fut = asyncio.get_running_loop().create_task(self._after(held, gate, frame))
        self._queue.append((fut, len(frame)))
        if not taken:
            self._take_memory(len(frame))
        self._ready.set()
        if len(self._queue) >= MAX_IN_FLIGHT and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()

    def hold(self) -> None:
        """Start this connection's later requests only once the current one is answered
        (:meth:`RequestContext.hold <samsa.broker.context.RequestContext.hold>`): asked
        by a handler, before its first wait, that waits before it takes effect."""
        if not self._starting:
            raise RuntimeError("hold() after the handler's first wait")
        if self._hold is None:
            self._hold = asyncio.get_running_loop().create_future()

    def _begin(self, frame: bytes | memoryview) -> asyncio.Future[Outgoing]:
        """Start a request's handler (up to its first wait)."""
        self._starting = True
        try:
            return _start(self._handle(frame))
        finally:
            self._starting = False

    def _took_hold(self, fut: asyncio.Future[Outgoing]) -> asyncio.Future[None] | None:
        """The hold the request just started asked for, released once ``fut`` is done;
        None when it asked for none or is answered already."""
        hold, self._hold = self._hold, None
        if hold is None or fut.done():
            return None
        fut.add_done_callback(lambda _: _release(hold))
        return hold

    async def _after(self, held: asyncio.Future[None], gate: asyncio.Future[None],
                     frame: bytes | memoryview) -> Outgoing:
        """A request that arrived while ``held``: started once it is released; ``gate``
        (what the next request waits for) opens once this one started and holds nothing."""
        await held
        fut = self._begin(frame)
        hold = self._took_hold(fut)
        if hold is None:
            _release(gate)
        else:
            hold.add_done_callback(lambda _: _release(gate))
        return await fut

    def _fail(self, reason: str) -> None:
        log.info("closing connection from %s on %s: %s", self.host, self.listener, reason)
        self.close()

    def close(self) -> None:
        self._closed = True
        self._ready.set()
        if self.transport is not None:
            self.transport.close()

    # -- requests and answers --------------------------------------------------------------
    async def _handle(self, frame: bytes | memoryview) -> Outgoing:
        auth = self.auth
        if not auth.authenticated:
            early = await self._authenticate(frame)
            if early is not None:
                return early
        try:
            request = decode_request(frame, self.broker.supported)
        except UnsupportedApi as exc:
            if exc.api_key == ApiKey.API_VERSIONS:  # answer v0 with UNSUPPORTED_VERSION
                answer = unsupported_version_response(self.broker)
                return encode_response(exc.correlation_id, answer)
            raise
        if auth.sasl is not None:
            reply = auth.on_request(request, now_ms())
            if reply is not None:
                return await self._sasl_answer(request.correlation_id, reply)
            self.max_frame = auth.max_frame(self.frame_limit)
        started = time.perf_counter()
        ctx = RequestContext(self.broker, request, self.host, auth.principal, self.listener,
                             self)
        response = await self.broker.dispatch(ctx)
        out: Outgoing = None
        if isinstance(response, Encoded):
            out = response.frame(request.correlation_id)
        elif isinstance(response, Spliced):
            out = encode_spliced(request.correlation_id, response)
        elif response is not None:
            out = encode_response(request.correlation_id, response)
        sent = 0 if out is None else len(out) if isinstance(out, bytes) else sum(map(len, out))
        self.broker.metrics.observe_request(request.api_key, time.perf_counter() - started,
                                            len(frame) + 4, sent)
        return out

    async def _authenticate(self, frame: bytes | memoryview) -> bytes | None:
        """A frame before authentication: the answer to a bare SASL token, None for a
        request that may be decoded, FrameError (closing) for any other."""
        auth = self.auth
        if auth.expects_raw_token:
            reply = auth.on_raw(bytes(frame), now_ms())
            return await self._sasl_answer(None, reply)
        api_key, _, _ = peek_header(frame)
        if not auth.admits(api_key):
            raise FrameError(f"request with api key {api_key} before authentication")
        return None

    async def _sasl_answer(self, correlation_id: int | None, reply: Reply) -> bytes:
        """Send a SASL reply; a failure waits ``connection.failed.authentication.delay.ms``
        (KIP-306) and closes after its answer."""
        if reply.failed:
            log.info("authentication failed for %s on %s: %s", self.host, self.listener,
                     reply.reason)
            self.broker.metrics.authentication_failures += 1
            await asyncio.sleep(int(self.broker.config[
                "connection.failed.authentication.delay.ms"]) / 1000)
        elif reply.close:
            log.info("closing connection from %s on %s: %s", self.host, self.listener,
                     reply.reason)
        self.max_frame = self.auth.max_frame(self.frame_limit)
        out: bytes = b""
        if reply.response is not None:
            assert correlation_id is not None
            out = encode_response(correlation_id, reply.response)
        elif reply.raw is not None:
            out = _SIZE.pack(len(reply.raw)) + reply.raw
        if reply.close:
            self._closing = True
            return _Closing(out)
        if self.auth.authenticated:
            self.broker.metrics.authentications += 1
        return out

    async def _write_loop(self) -> None:
        """Write the answers in request order: every answer ready goes out in one write."""
        ready: list[bytes | memoryview] = []
        while True:
            while not self._queue:
                if self._closed:
                    return
                self._ready.clear()
                await self._ready.wait()
            task, size = self._queue[0]
            if ready and not task.done():
                self._flush(ready)
                if not self._can_write.is_set():
                    await self._can_write.wait()
                continue
            try:
                out = await task
            except FrameError as exc:
                self._flush(ready)
                self._fail(str(exc))
                return
            except asyncio.CancelledError:
                return
            except Exception:
                self._flush(ready)
                log.exception("handler failed; closing connection from %s", self.host)
                self.close()
                return
            if self._closed or self.transport is None:
                return
            self._queue.popleft()
            self.broker.request_memory.give(size)
            self.broker.memory_given()
            if self._paused and len(self._queue) < MAX_IN_FLIGHT // 2:
                self._paused = False
                if not self._memory_paused:
                    self.transport.resume_reading()
            self.last_active = time.monotonic()
            if isinstance(out, _Closing):
                self._flush(ready)
                if out:
                    self.transport.write(out)
                self.close()
                return
            if isinstance(out, list):
                ready.extend(out)
            elif out is not None:
                ready.append(out)
            if not self._queue:
                self._flush(ready)
                if not self._can_write.is_set():
                    await self._can_write.wait()

    def _flush(self, ready: list[bytes | memoryview]) -> None:
        if ready and self.transport is not None and not self._closed:
            self.transport.writelines(ready)
        ready.clear()


def _release(hold: asyncio.Future[None]) -> None:
    if not hold.done():
        hold.set_result(None)


def _start(coro: Coroutine[Any, Any, Outgoing]) -> asyncio.Future[Outgoing]:
    """Run a request's handler at once, up to where it first waits (most answers need no
    wait: a heartbeat's is ready then); an answer ready at once costs no task. Handlers
    still start in arrival order, each before the next frame is read."""
    loop = asyncio.get_running_loop()
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        fut: asyncio.Future[Outgoing] = loop.create_future()
        fut.set_result(done.value)
        return fut
    except Exception as exc:
        fut = loop.create_future()
        fut.set_exception(exc)
        return fut
    if waiting is not None:  # as a task's step does: another handler may await it too
        waiting._asyncio_future_blocking = False
    return loop.create_task(_finish(coro, waiting))


async def _finish(coro: Coroutine[Any, Any, Outgoing], waiting: Any) -> Outgoing:
    """The rest of a handler that waits on ``waiting`` (a future, or None for a bare yield),
    as a task: its own cancellation is thrown into the handler, as a task's is."""
    while True:
        failure: BaseException | None = None
        try:
            if waiting is None:
                await asyncio.sleep(0)
            else:
                waiting._asyncio_future_blocking = False  # as a task's step does
                await waiting
        except BaseException as exc:  # the future's own outcome reaches the handler as is
            if not (waiting is not None and waiting.done() and (
                    waiting.cancelled() or waiting.exception() is exc)):
                failure = exc  # this task was cancelled
        try:
            waiting = coro.send(None) if failure is None else coro.throw(failure)
        except StopIteration as done:
            return cast(Outgoing, done.value)
