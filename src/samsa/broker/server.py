"""The asyncio edge: listening socket, connections, request dispatch, background tasks.

Each connection reads size-prefixed frames and starts a handler task per request in
arrival order (so a handler's synchronous part, e.g. a log append, runs in order); the
responses are written back strictly in request order. Frames that are too large or do
not decode close the connection; an unsupported ApiVersions version is answered with
UNSUPPORTED_VERSION in a v0 body, as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections import deque
from typing import Any, cast

from samsa.broker import access
from samsa.broker.clock import now_ms
from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.flusher import Flusher
from samsa.broker.groups import GroupRuntime
from samsa.broker.handlers import Handler, registry
from samsa.broker.handlers.api_versions import unsupported_version_response
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.producer_ids import ProducerIdAllocator
from samsa.broker.topics import TopicManager
from samsa.cluster.node import ClusterNode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import convert
from samsa.protocol.codec import (
    FrameError,
    Spliced,
    UnsupportedApi,
    decode_request,
    encode_response,
    encode_spliced,
    response_class,
)
from samsa.storage.pg.engine import PgEngine, PgProducerIds
from samsa.storage.pg.topics import PgTopicManager

log = logging.getLogger("samsa.broker")

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 128
_RECV_BUFFER = 1 << 16

Outgoing = bytes | list[bytes | memoryview] | None
"""A response frame, as one buffer or several (spliced), or nothing (acks=0)."""


class Broker:
    """A samsa node: topics, request handlers and the TCP server."""

    def __init__(self, config: BrokerConfig, storage: str | None = None) -> None:
        self.config = config
        self.topics = TopicManager(config)
        self.flusher = Flusher()
        self.producer_ids: ProducerIdAllocator | PgProducerIds = ProducerIdAllocator(
            config.data_dir / "producer-ids")
        self.engine: PgEngine | None = None
        self.cluster: ClusterNode | None = None
        if storage:  # a cluster node over PostgreSQL (samsa.cluster)
            self.engine = PgEngine(storage, config.node_id)
            self.topics = PgTopicManager(config, self.engine)
            self.producer_ids = PgProducerIds(self.engine)
        self.metrics = BrokerMetrics()
        self.authorizer = access.authorizer_for(config, self.engine)
        self.groups = GroupRuntime(self)
        self.handlers: dict[int, tuple[tuple[int, int], Handler]] = registry()
        self.supported = {key: versions for key, (versions, _) in self.handlers.items()}
        self.features_epoch = now_ms()
        """FinalizedFeaturesEpoch of ApiVersions: the start time (see samsa.broker.features)."""
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        if self.engine is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.engine.open)
        if self.authorizer is not None:
            await self.authorizer.load()
        self.topics.load(now_ms())
        self.groups.start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self), self.config.host, self.config.port, backlog=1024
        )
        if self.config.port == 0:
            # Advertise the ephemeral port we actually got.
            object.__setattr__(self.config, "port", self.port)
        if self.engine is not None:
            assert isinstance(self.topics, PgTopicManager)
            self.cluster = ClusterNode(self, self.engine, self.topics)
            await self.cluster.start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self.started.set()
        log.info("samsa listening on %s:%d", self.config.host, self.port)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.cluster is not None:
            await self.cluster.stop()  # hands its leases over first
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        await self.groups.stop()
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.get_running_loop().run_in_executor(None, self._flush_all)
        self.topics.close()
        if self.engine is not None:
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

    def run_retention(self, now: int) -> None:
        """Apply retention to every partition."""
        for topic in self.topics:
            for part in topic.partitions:
                try:
                    part.log.apply_retention(now)
                except Exception:  # keep serving; report the partition
                    log.exception("retention failed for %s-%d", part.topic, part.index)

    async def run_compaction(self, now: int) -> None:
        """Compact every partition whose cleanup.policy has compact, one at a time.

        Choosing segments and swapping the cleaned files in happen here, on the loop;
        rewriting them (seconds for a large segment) runs on a worker thread meanwhile,
        so requests keep being served.
        """
        loop = asyncio.get_running_loop()
        for topic in list(self.topics):
            for part in list(topic.partitions):
                if part.log.closed or not part.log.config.compact:
                    continue  # closed: its topic was deleted meanwhile
                try:
                    plan = part.log.plan_compaction(now)
                    if plan is None:
                        continue
                    try:
                        sizes = await loop.run_in_executor(None, part.log.clean, plan)
                    except asyncio.CancelledError:
                        raise  # shutting down: closing the log stops the cleaner
                    except Exception:
                        part.log.install_cleaned(plan, None)
                        raise
                    part.log.install_cleaned(plan, sizes)
                except Exception:  # keep serving; report the partition
                    log.exception("compaction failed for %s-%d", part.topic, part.index)

    async def dispatch(self, ctx: RequestContext) -> Any:
        """The handler's answer in the request's version: a handler may build a typed
        answer of another version of the API (its newest); :func:`convert` maps it."""
        request = ctx.request
        _, handler = self.handlers[request.api_key]
        response = await handler(ctx)
        if response is None or isinstance(response, Spliced):
            return response
        return convert(response, response_class(request.api_key, request.api_version))


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in, a handler task per request, answers in order.

    Small frames are cut from a fixed receive buffer; a frame larger than it is received
    straight into a buffer of its own (no copies of megabyte produce requests). When
    ``MAX_IN_FLIGHT`` requests are pending, reading pauses until answers go out.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.max_frame = int(broker.config["socket.request.max.bytes"])
        self.transport: asyncio.Transport | None = None
        self.host = "/unknown"
        self._buf = bytearray(_RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._len = 0
        self._big: bytearray | None = None
        self._big_pos = 0
        self._queue: deque[asyncio.Task[Outgoing]] = deque()
        self._ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._closed = False
        self._paused = False
        self._writer: asyncio.Task[None] | None = None

    # -- transport callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = self.transport.get_extra_info("peername")
        self.host = f"/{peer[0]}" if peer else "/unknown"
        self.broker.connections.add(self)
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._ready.set()
        self._can_write.set()
        for task in self._queue:
            task.cancel()
        self._queue.clear()
        self.broker.connections.discard(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_pos :]
        return self._view[self._len :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        if self._big is not None:
            self._big_pos += nbytes
            if self._big_pos == len(self._big):
                frame, self._big = self._big, None
                self._submit(memoryview(frame).toreadonly())  # kio reads read-only buffers
            return
        self._len += nbytes
        self._cut_frames()

    def eof_received(self) -> bool:
        return False  # close our side too

    # -- framing ---------------------------------------------------------------------------
    def _cut_frames(self) -> None:
        buf, end, pos = self._buf, self._len, 0
        while end - pos >= 4:
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

    def _submit(self, frame: bytes | memoryview) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(frame))
        self._queue.append(task)
        self._ready.set()
        if len(self._queue) >= MAX_IN_FLIGHT and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()

    def _fail(self, reason: str) -> None:
        log.info("closing connection from %s: %s", self.host, reason)
        self.close()

    def close(self) -> None:
        self._closed = True
        self._ready.set()
        if self.transport is not None:
            self.transport.close()

    # -- requests and answers --------------------------------------------------------------
    async def _handle(self, frame: bytes | memoryview) -> Outgoing:
        try:
            request = decode_request(frame, self.broker.supported)
        except UnsupportedApi as exc:
            if exc.api_key == ApiKey.API_VERSIONS:  # answer v0 with UNSUPPORTED_VERSION
                answer = unsupported_version_response(self.broker)
                return encode_response(exc.correlation_id, answer)
            raise
        started = time.perf_counter()
        ctx = RequestContext(self.broker, request, self.host)
        response = await self.broker.dispatch(ctx)
        out: Outgoing = None
        if isinstance(response, Spliced):
            out = encode_spliced(request.correlation_id, response)
        elif response is not None:
            out = encode_response(request.correlation_id, response)
        sent = 0 if out is None else len(out) if isinstance(out, bytes) else sum(map(len, out))
        self.broker.metrics.observe_request(request.api_key, time.perf_counter() - started,
                                            len(frame) + 4, sent)
        return out

    async def _write_loop(self) -> None:
        while True:
            while not self._queue:
                if self._closed:
                    return
                self._ready.clear()
                await self._ready.wait()
            task = self._queue[0]
            try:
                out = await task
            except FrameError as exc:
                self._fail(str(exc))
                return
            except asyncio.CancelledError:
                return
            except Exception:
                log.exception("handler failed; closing connection from %s", self.host)
                self.close()
                return
            if self._closed or self.transport is None:
                return
            self._queue.popleft()
            if self._paused and len(self._queue) < MAX_IN_FLIGHT // 2:
                self._paused = False
                self.transport.resume_reading()
            if out is None:
                continue
            if isinstance(out, list):
                self.transport.writelines(out)
            else:
                self.transport.write(out)
            if not self._can_write.is_set():
                await self._can_write.wait()
