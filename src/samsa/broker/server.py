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
from typing import Any

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
from samsa.protocol.codec import (
    FrameError,
    Spliced,
    UnsupportedApi,
    decode_request,
    encode_response,
    encode_spliced,
)

log = logging.getLogger("samsa.broker")

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 128

Outgoing = bytes | list[bytes | memoryview] | None
"""A response frame, as one buffer or several (spliced), or nothing (acks=0)."""


class Broker:
    """A samsa node: topics, request handlers and the TCP server."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.topics = TopicManager(config)
        self.flusher = Flusher()
        self.producer_ids = ProducerIdAllocator(config.data_dir / "producer-ids")
        self.metrics = BrokerMetrics()
        self.groups = GroupRuntime(self)
        self.handlers: dict[int, tuple[tuple[int, int], Handler]] = registry()
        self.supported = {key: versions for key, (versions, _) in self.handlers.items()}
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.topics.load(now_ms())
        self.groups.start()
        self._server = await asyncio.start_server(
            self._accept, self.config.host, self.config.port, limit=1 << 20, backlog=1024
        )
        if self.config.port == 0:
            # Advertise the ephemeral port we actually got.
            object.__setattr__(self.config, "port", self.port)
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self.started.set()
        log.info("samsa listening on %s:%d", self.config.host, self.port)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        await self.groups.stop()
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.get_running_loop().run_in_executor(None, self._flush_all)
        self.topics.close()

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

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        self._connections.add(conn)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)

    async def _housekeeping(self) -> None:
        interval = max(0.05, int(self.config["log.retention.check.interval.ms"]) / 1000)
        while True:
            await asyncio.sleep(interval)
            self.run_retention(now_ms())

    def run_retention(self, now: int) -> None:
        """Apply retention and compaction to every partition."""
        for topic in self.topics:
            for part in topic.partitions:
                try:
                    part.log.apply_retention(now)
                    if part.log.config.compact:
                        part.log.compact(now)
                except Exception:  # keep serving; report the partition
                    log.exception("retention failed for %s-%d", part.topic, part.index)

    async def dispatch(self, ctx: RequestContext) -> Any:
        _, handler = self.handlers[ctx.request.api_key]
        return await handler(ctx)


class Connection:
    """One client connection: ordered request/response pipeline."""

    def __init__(
        self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.host = f"/{peer[0]}" if peer else "/unknown"
        self._queue: deque[asyncio.Task[Outgoing]] = deque()
        self._ready = asyncio.Event()
        self._closed = False

    def close(self) -> None:
        self._closed = True
        self._ready.set()
        self.writer.close()

    async def run(self) -> None:
        writer_task = asyncio.create_task(self._write_loop())
        try:
            await self._read_loop()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except FrameError as exc:
            log.info("closing connection from %s: %s", self.host, exc)
        finally:
            self._closed = True
            self._ready.set()
            with contextlib.suppress(Exception):
                await writer_task
            for task in self._queue:
                task.cancel()
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()

    async def _read_loop(self) -> None:
        max_bytes = int(self.broker.config["socket.request.max.bytes"])
        while not self._closed:
            head = await self.reader.readexactly(4)
            (size,) = _SIZE.unpack(head)
            if size < 0 or size > max_bytes:
                raise FrameError(f"frame size {size} outside [0, {max_bytes}]")
            frame = await self.reader.readexactly(size)
            task = asyncio.create_task(self._handle(frame))
            self._queue.append(task)
            self._ready.set()
            if len(self._queue) >= MAX_IN_FLIGHT:
                await asyncio.wait({self._queue[0]})

    async def _handle(self, frame: bytes) -> Outgoing:
        try:
            request = decode_request(frame, self.broker.supported)
        except UnsupportedApi as exc:
            if exc.api_key == 18:  # ApiVersions: answer v0 with UNSUPPORTED_VERSION
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
                log.info("closing connection from %s: %s", self.host, exc)
                self.close()
                return
            except asyncio.CancelledError:
                return
            except Exception:
                log.exception("handler failed; closing connection from %s", self.host)
                self.close()
                return
            self._queue.popleft()
            if out is None:
                continue
            if isinstance(out, list):
                self.writer.writelines(out)
            else:
                self.writer.write(out)
            if self.writer.transport.get_write_buffer_size() > 1 << 20:
                await self.writer.drain()
